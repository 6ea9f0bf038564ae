// Copies and bursts on pamir's page: the groups `pamir index` found (exact copies, near-copies,
// bursts), each with the picture to keep; an editor keeps another with its Keep button
// (pamir/server/duplicates.py; a viewer's token gets the server's refusal, said here).
// Nothing is deleted: `pamir duplicates --move-to DIR` moves the others aside.
// Loaded after app.js, whose api(), post(), setMessage() and openDetail() it calls.
"use strict";

const KIND_NAMES = { exact: "exact copies", near: "near-copies", burst: "burst" };

function duplicatesStyle() {
  const style = document.createElement("style");
  style.textContent = `
  #duplicates { margin: 0 0 .8rem; }
  #duplicates[hidden] { display: none; }
  #duplicates .group { display: flex; flex-wrap: wrap; align-items: flex-start; gap: .5rem;
                       padding: .4rem 0; border-bottom: 1px solid var(--line); }
  #duplicates .kind { flex: none; width: 7rem; font-size: .85rem; }
  #duplicates figure { margin: 0; width: 110px; font-size: .75rem; text-align: center; }
  #duplicates figure img { width: 100px; height: 75px; object-fit: cover; cursor: pointer;
                           border: 3px solid transparent; border-radius: 4px; }
  #duplicates figure.kept img { border-color: var(--accent); }
  #duplicates figure button { font-size: .75rem; padding: .1rem .4rem; }
  #duplicates figcaption { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }`;
  document.head.append(style);
}

async function loadDuplicates() {
  let groups;
  try {
    groups = (await api("/api/duplicates")).groups;
  } catch (e) {
    return;  // a server without the route, an index without looks: no view
  }
  const box = $("duplicates");
  const summary = document.createElement("summary");
  summary.textContent = `Copies and bursts (${groups.length} groups)`;
  const note = document.createElement("p");
  note.className = "muted";
  note.textContent = "Keep one of each group; pamir never deletes a picture: " +
    "`pamir duplicates --move-to DIR` moves the others aside.";
  box.replaceChildren(summary, note, ...groups.map(groupRow));
  box.hidden = !groups.length;
}

function groupRow(g) {
  const row = document.createElement("div");
  row.className = "group";
  row.dataset.kind = g.kind;
  const kind = document.createElement("strong");
  kind.className = "kind";
  kind.textContent = `${KIND_NAMES[g.kind] || g.kind} (${g.pictures.length})`;
  row.append(kind, ...g.pictures.map((p) => pictureOfGroup(g, p)));
  return row;
}

function pictureOfGroup(g, p) {
  const fig = document.createElement("figure");
  fig.dataset.id = p.id;
  if (p.id === g.keep) fig.classList.add("kept");
  const img = Object.assign(document.createElement("img"),
                            { src: `${p.thumbnail}?size=128`, alt: p.name, loading: "lazy" });
  img.title = p.path;
  img.addEventListener("click", () => openDetail(p.id));
  const caption = document.createElement("figcaption");
  caption.textContent = p.name;
  const keep = document.createElement("button");
  keep.type = "button";
  keep.className = "keep-one";
  keep.textContent = p.id === g.keep ? (g.chosen ? "kept" : "keep (largest)") : "keep";
  keep.disabled = p.id === g.keep && g.chosen;
  keep.addEventListener("click", () => keepPicture(p.id, g.kind === "burst"));
  fig.append(img, caption, keep);
  return fig;
}

// A search's hit that stands for its copies (the API's `folded`): "+N", beside its date.
function foldedSpan(hit) {
  if (!hit.folded || !hit.folded.length) return null;
  const span = document.createElement("span");
  span.className = "folded";
  span.textContent = `+${hit.folded.length}`;
  span.title = `${hit.folded.length} more like it (its copies, or its burst), folded into ` +
    "this one: Copies and bursts above lists them";
  return span;
}

async function keepPicture(id, burst) {
  try {
    await post("/api/duplicates/keep", { picture: id, burst });
    await loadDuplicates();
    $("duplicates").open = true;
    setMessage("Kept in the index: `pamir duplicates --move-to DIR` moves the others aside.");
  } catch (e) {
    setMessage(e.message, true);
  }
}

(function mountDuplicates() {
  duplicatesStyle();
  const box = Object.assign(document.createElement("details"), { id: "duplicates", hidden: true });
  box.setAttribute("aria-label", "copies and bursts");
  $("message").before(box);
  loadDuplicates();
})();
