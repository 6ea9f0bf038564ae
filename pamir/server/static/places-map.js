// The offline map of where the pictures were taken, for places.js: Natural
// Earth's country outlines (world.json, public domain, made by scripts/world_outlines.py)
// in plain SVG, no tile server. The projection is equirectangular, x = lon + 180 and
// y = 90 - lat. Pictures near each other on the screen are one marker with their count;
// a click on a marker searches its place (the place most of its pictures were taken).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
// A marker gathers the pictures within this share of the map's width.
const CLUSTER_SHARE = 1 / 24;
const MIN_VIEW_DEGREES = 0.05;  // the closest zoom: about 5 km across

const mapState = { points: [], view: null, svg: null, markers: null };

async function loadMap(box) {
  let holder = document.getElementById("places-map");
  if (!holder) {
    holder = document.createElement("div");
    holder.id = "places-map";
    holder.className = "places-map";
    box.append(holder);
  }
  try {
    const [world, res] = await Promise.all([
      fetch("/static/world.json").then((r) => r.json()), api("/api/places/map")]);
    mapState.points = res.points.map((p) => ({ ...p, x: p.lon + 180, y: 90 - p.lat }));
    holder.hidden = !mapState.points.length;
    if (!mapState.points.length) return;
    drawMap(holder, world);
  } catch (e) {
    holder.hidden = true;  // no outlines or no API: the tree alone
  }
}

function drawMap(holder, world) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", "world");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "where the pictures were taken");
  svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
  const land = document.createElementNS(SVG_NS, "g");
  land.setAttribute("class", "land");
  for (const c of world.countries) {
    const path = document.createElementNS(SVG_NS, "path");
    path.setAttribute("d", c.d);
    path.setAttribute("vector-effect", "non-scaling-stroke");
    const title = document.createElementNS(SVG_NS, "title");
    title.textContent = c.name;
    path.append(title);
    land.append(path);
  }
  mapState.markers = document.createElementNS(SVG_NS, "g");
  mapState.markers.setAttribute("class", "markers");
  svg.append(land, mapState.markers);
  mapState.svg = svg;
  holder.replaceChildren(svg, zoomButtons());
  setView(fitView(mapState.points));
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    zoom(e.deltaY < 0 ? 0.5 : 2, svgPoint(e));
  }, { passive: false });
  dragToPan(svg);
}

// The view around the points, with room around them (the world where they are far apart).
function fitView(points) {
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const w = Math.max(x1 - x0, 2) * 1.6, h = Math.max(y1 - y0, 1) * 1.6;
  const width = Math.min(360, Math.max(w, 2 * h)), height = width / 2;
  return { x: (x0 + x1) / 2 - width / 2, y: (y0 + y1) / 2 - height / 2, w: width, h: height };
}

function setView(v) {
  const w = Math.min(360, Math.max(MIN_VIEW_DEGREES, v.w)), h = w / 2;
  const cx = v.x + v.w / 2, cy = v.y + v.h / 2;
  mapState.view = { x: cx - w / 2, y: cy - h / 2, w, h };
  const { x, y } = mapState.view;
  mapState.svg.setAttribute("viewBox", `${x} ${y} ${w} ${h}`);
  drawMarkers();
}

function zoom(factor, at) {
  const v = mapState.view, c = at || { x: v.x + v.w / 2, y: v.y + v.h / 2 };
  const w = v.w * factor, h = v.h * factor;
  setView({ x: c.x - (c.x - v.x) * factor, y: c.y - (c.y - v.y) * factor, w, h });
}

function svgPoint(e) {
  const r = mapState.svg.getBoundingClientRect(), v = mapState.view;
  const scale = Math.max(v.w / r.width, v.h / r.height);  // "meet": the larger ratio
  const ox = (r.width - v.w / scale) / 2, oy = (r.height - v.h / scale) / 2;
  return { x: v.x + (e.clientX - r.left - ox) * scale, y: v.y + (e.clientY - r.top - oy) * scale };
}

// Dragging moves the map: the point first pressed stays under the pointer.
function dragToPan(svg) {
  let held = null;
  svg.addEventListener("pointerdown", (e) => {
    if (!e.target.closest(".marker")) held = svgPoint(e);
  });
  svg.addEventListener("pointermove", (e) => {
    if (!held) return;
    const p = svgPoint(e), v = mapState.view;
    setView({ ...v, x: v.x + held.x - p.x, y: v.y + held.y - p.y });
  });
  for (const end of ["pointerup", "pointerleave"]) svg.addEventListener(end, () => { held = null; });
}

function zoomButtons() {
  const div = document.createElement("div");
  div.className = "map-zoom";
  for (const [label, factor] of [["+", 0.5], ["−", 2]]) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.setAttribute("aria-label", factor < 1 ? "zoom in" : "zoom out");
    b.addEventListener("click", () => zoom(factor));
    div.append(b);
  }
  const all = document.createElement("button");
  all.type = "button";
  all.textContent = "all";
  all.setAttribute("aria-label", "show every picture");
  all.addEventListener("click", () => setView(fitView(mapState.points)));
  div.append(all);
  return div;
}

// Markers: the points in view gathered on a grid of CLUSTER_SHARE of the view's width.
function clusters(points, view) {
  const cell = view.w * CLUSTER_SHARE, groups = new Map();
  for (const p of points) {
    const key = `${Math.floor(p.x / cell)},${Math.floor(p.y / cell)}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(p);
  }
  return [...groups.values()].map((ps) => {
    const count = new Map();
    for (const p of ps) count.set(p.query, (count.get(p.query) || 0) + 1);
    const query = [...count.entries()].sort((a, b) => b[1] - a[1])[0][0];
    const name = ps.find((p) => p.query === query).name;
    return { x: ps.reduce((s, p) => s + p.x, 0) / ps.length,
             y: ps.reduce((s, p) => s + p.y, 0) / ps.length, n: ps.length, query, name };
  });
}

function drawMarkers() {
  const v = mapState.view, unit = v.w / 360 * 3.5;  // a marker's size on the screen stays put
  mapState.markers.replaceChildren(...clusters(mapState.points, v).map((c) => {
    const g = document.createElementNS(SVG_NS, "g");
    g.setAttribute("class", "marker");
    g.dataset.query = c.query;
    g.dataset.count = c.n;
    const circle = document.createElementNS(SVG_NS, "circle");
    circle.setAttribute("cx", c.x);
    circle.setAttribute("cy", c.y);
    circle.setAttribute("r", unit * (1 + Math.log10(c.n)));
    const text = document.createElementNS(SVG_NS, "text");
    text.setAttribute("x", c.x);
    text.setAttribute("y", c.y);
    text.setAttribute("font-size", unit * 1.3);
    text.textContent = c.n;
    const title = document.createElementNS(SVG_NS, "title");
    title.textContent = `${c.name}: ${c.n} picture${c.n === 1 ? "" : "s"} (${c.query})`;
    g.append(circle, text, title);
    g.addEventListener("click", () => search(c.query));
    return g;
  }));
}
