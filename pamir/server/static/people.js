// People on pamir's page: the people in the pictures as faces with their counts,
// a way in to search. A named person's face searches person:"name"; any person's "…" opens
// their faces, where an editor names them, merges them into someone, or says a face is not
// them (pamir/server/people.py; a viewer's token gets the server's refusal, said here).
// Loaded after app.js, whose search() it calls.
"use strict";

const people = { list: [] };

function peopleStyle() {
  const style = document.createElement("style");
  style.textContent = `
  #people { display: flex; gap: .6rem; overflow-x: auto; padding: 0 0 .8rem; margin: 0 0 .8rem;
            border-bottom: 1px solid var(--line); }
  #people[hidden] { display: none; }
  .person { flex: none; width: 84px; text-align: center; font-size: .8rem; position: relative; }
  .person img, .person-face img { width: 72px; height: 72px; object-fit: cover; border-radius: 50%;
                border: 2px solid var(--line); display: block; margin: 0 auto .2rem; }
  .person button.face { border: none; background: none; padding: 0; color: var(--fg); cursor: pointer;
                        font-size: .8rem; width: 100%; }
  .person button.face:hover img { border-color: var(--accent); }
  .person button.more { position: absolute; top: 0; right: 0; padding: 0 .3rem; font-size: .8rem;
                        background: rgba(255,255,255,.9); color: var(--fg); border: 1px solid var(--line); }
  #person-panel { border: 1px solid var(--line); border-radius: 8px; padding: .6rem; margin: 0 0 .8rem;
                  position: relative; }
  #person-panel .close { position: absolute; top: .3rem; right: .3rem; }
  #person-panel[hidden] { display: none; }
  #person-panel .faces { display: flex; flex-wrap: wrap; gap: .5rem; margin: .5rem 0; }
  .person-face { display: flex; flex-direction: column; align-items: center; gap: .2rem; }
  .person-face button { font-size: .75rem; padding: .1rem .4rem; background: white; color: var(--fg);
                        border: 1px solid var(--line); }
  .person-face button.look { border: none; padding: 0; }
  #person-panel form { display: inline-flex; gap: .3rem; max-width: none; flex: none; margin-right: .8rem; }`;
  document.head.append(style);
}

function faceImg(faceId, alt) {
  const img = document.createElement("img");
  img.src = `/api/faces/${faceId}/crop?size=128`;
  img.alt = alt;
  img.loading = "lazy";
  return img;
}

async function loadPeople() {
  try {
    people.list = (await api("/api/people")).people;
  } catch (e) {
    return;  // an index without people: no strip
  }
  const strip = $("people");
  strip.replaceChildren(...people.list.map(personCard));
  strip.hidden = !people.list.length;
}

function personCard(p) {
  const card = document.createElement("div");
  card.className = "person";
  const open = document.createElement("button");
  open.className = "face";
  open.title = p.query ? `search ${p.query}` : `${p.label}: no name yet — name them`;
  if (p.face !== null) open.append(faceImg(p.face, p.label));
  open.append(`${p.label} (${p.pictures})`);
  open.addEventListener("click", () => (p.query ? search(p.query) : openPerson(p.id)));
  const more = document.createElement("button");
  more.className = "more";
  more.textContent = "…";
  more.title = "their faces: name, merge, not this person";
  more.addEventListener("click", () => openPerson(p.id));
  card.append(open, more);
  return card;
}

async function openPerson(id) {
  const panel = $("person-panel");
  let p;
  try {
    p = await api(`/api/people/${id}`);
  } catch (e) {
    setMessage(e.message, true);
    return;
  }
  const title = document.createElement("strong");
  title.textContent = `${p.label}: ${p.pictures} pictures `;
  const nameForm = document.createElement("form");
  const input = Object.assign(document.createElement("input"),
                              { type: "text", placeholder: "name", value: p.name || "" });
  nameForm.append(input, Object.assign(document.createElement("button"), { textContent: "Name" }));
  nameForm.addEventListener("submit", (e) => {
    e.preventDefault();
    change(`/api/people/${id}/name`, { name: input.value });
  });
  const mergeForm = document.createElement("form");
  const select = document.createElement("select");
  select.append(...people.list.filter((o) => o.id !== id).map((o) =>
    Object.assign(document.createElement("option"), { value: o.id, textContent: o.label })));
  mergeForm.append("is", select, Object.assign(document.createElement("button"), { textContent: "Merge" }));
  mergeForm.addEventListener("submit", (e) => {
    e.preventDefault();
    change(`/api/people/${id}/merge`, { into: Number(select.value) });
  });
  const close = Object.assign(document.createElement("button"), { textContent: "×", className: "close" });
  close.addEventListener("click", () => { panel.hidden = true; });
  const faces = document.createElement("div");
  faces.className = "faces";
  faces.append(...p.face_list.map((f) => {
    const box = document.createElement("div");
    box.className = "person-face";
    const look = document.createElement("button");
    look.className = "look";
    look.append(faceImg(f.id, p.label));
    look.title = "open the picture";
    look.addEventListener("click", () => openDetail(f.picture));
    const not = Object.assign(document.createElement("button"), { textContent: `not ${p.label}` });
    not.title = f.how === "carried" ? `named because it looks like them (${Math.round(f.confidence * 100)} %)` : f.how;
    not.addEventListener("click", () => change(`/api/faces/${f.id}/not`, { person: id }));
    box.append(look, not);
    return box;
  }));
  panel.replaceChildren(title, nameForm, mergeForm, close, faces);
  panel.hidden = false;
}

async function change(url, body) {
  try {
    const out = await post(url, body);
    await loadPeople();
    if (people.list.some((p) => p.id === out.person)) openPerson(out.person);
    else $("person-panel").hidden = true;
    setMessage("Kept in the index.");
  } catch (e) {
    setMessage(e.message, true);
  }
}

(function mountPeople() {
  peopleStyle();
  const strip = Object.assign(document.createElement("section"), { id: "people", hidden: true });
  strip.setAttribute("aria-label", "people");
  const panel = Object.assign(document.createElement("section"), { id: "person-panel", hidden: true });
  $("message").before(strip, panel);
  loadPeople();
})();
