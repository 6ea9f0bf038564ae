// Where a picture was taken and what is written on it, for app.js: the
// collection's places as a way in (a tree; a click searches place:NAME), a hit's
// place beside its date, and the lines of text read on a picture outlined over it in the
// detail view (GET /api/pictures/{id}: "text", boxes as fractions of the picture).
"use strict";

// The places: a tree, country → region → city → place, each "Kyoto 12" (GET /api/places/tree;
// the flat GET /api/places from an older server), then the map (places-map.js).
async function loadPlaces() {
  const box = document.getElementById("places");
  try {
    const res = await api("/api/places/tree").catch(() => null);
    const list = box.querySelector("ul");
    list.classList.add("place-tree");
    const nodes = res ? res.places : (await api("/api/places?limit=40")).places
      .map((p) => ({ name: p.shown, level: p.level, pictures: p.pictures, query: p.query, children: [] }));
    list.replaceChildren(...nodes.map(placeNode));
    box.hidden = !nodes.length;
    box.open = !state.q;  // open on the page's first view; a search keeps it out of the way
    if (nodes.length && typeof loadMap === "function") loadMap(box);
  } catch (e) {
    box.hidden = true;  // an older server, or none: the page works without it
  }
}

// One place of the tree: its button (a click searches it) and its places below, the most
// pictures first; below the first level they fold away behind the place's toggle.
function placeNode(p) {
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.type = "button";
  b.className = "place";
  b.dataset.query = p.query;
  b.dataset.level = p.level || "place";
  b.title = `${p.query} (${p.level || "place"})`;
  b.innerHTML = `<span class="place-name"></span> <span class="count"></span>`;
  b.querySelector(".place-name").textContent = p.name;
  b.querySelector(".count").textContent = p.pictures.toLocaleString();
  b.addEventListener("click", () => search(p.query));
  li.append(b);
  if (p.children && p.children.length) {
    const ul = document.createElement("ul");
    ul.replaceChildren(...p.children.map(placeNode));
    li.append(ul);
  }
  return li;
}

// What a fact hit holds of the query ("place: Kyoto, person: Alice"), shown where the
// score would be: a fact is certain, its look's score (often 0) says nothing. A name carried
// to a face that looks like the person's (confidence under 1) is "maybe Isolde". "" for others.
function heldLabel(hit) {
  return (hit.held || []).map((f) => `${f.kind === "keyword" ? "tag" : f.kind}: ` +
    (f.kind === "person" && f.confidence < 1 ? `maybe ${f.shown}`
      : f.kind === "colour" ? `${f.shown} ${Math.round(100 * f.confidence)} %`  // its share
        : f.shown)).join(", ");
}

// A picture's dominant colours (pamir.facts.colour), largest first: "colours: blue, grey", or "".
function coloursOf(hit) {
  const colours = (hit.facts && hit.facts.colour) || [];
  return colours.length ? `colours: ${colours.join(", ")}` : "";
}

// A hit's place, nearest first ("Kamigyō-ku, Kyoto, Japan"), or "".
function placeOf(hit) {
  return ((hit.facts && hit.facts.place) || []).join(", ");
}

// The card's place, beside its date: the nearest name, the whole place as its title.
function placeSpan(hit) {
  const where = placeOf(hit);
  if (!where) return null;
  const span = document.createElement("span");
  span.className = "where";
  span.textContent = hit.facts.place[0];
  span.title = where;
  return span;
}

// The detail view's text: an outline over the picture per line read, and the lines listed.
function showText(p) {
  const lines = p.text || [];
  const svg = document.getElementById("detail-text");
  svg.replaceChildren(...lines.map((t) => {
    const r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    const [x0, y0, x1, y1] = t.box;  // fractions: the viewBox is 0 0 1 1, scaled with the picture
    r.setAttribute("x", x0); r.setAttribute("y", y0);
    r.setAttribute("width", Math.max(0, x1 - x0)); r.setAttribute("height", Math.max(0, y1 - y0));
    r.setAttribute("vector-effect", "non-scaling-stroke");
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${t.text} (${Math.round(100 * t.confidence)} %)`;
    r.append(title);
    return r;
  }));
  document.getElementById("text-box").hidden = !lines.length;
  document.getElementById("text-lines").replaceChildren(...lines.map((t) => {
    const li = document.createElement("li");
    li.textContent = t.text;
    li.title = `recognised with ${Math.round(100 * t.confidence)} % confidence`;
    return li;
  }));
  fitText();
}

// The outlines cover the picture as it is drawn (object-fit: contain may leave margins).
function fitText() {
  const img = document.getElementById("detail-img"), svg = document.getElementById("detail-text");
  svg.style.display = document.getElementById("show-text").checked ? "" : "none";
  if (!img.naturalWidth) return;
  const scale = Math.min(img.clientWidth / img.naturalWidth, img.clientHeight / img.naturalHeight);
  const w = img.naturalWidth * scale, h = img.naturalHeight * scale;
  Object.assign(svg.style, { left: `${(img.clientWidth - w) / 2}px`,
                             top: `${(img.clientHeight - h) / 2}px`,
                             width: `${w}px`, height: `${h}px` });
}
