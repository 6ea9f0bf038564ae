// pamir's single page: search box, grid of thumbnails, picture detail with the block overlay.
// The query lives in the URL (?q=...&id=...), so a search can be bookmarked and shared.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { q: "", hits: [], marks: new Map() };

async function api(url) {
  const r = await fetch(url);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const detail = typeof body.detail === "string" ? body.detail
      : Array.isArray(body.detail) ? body.detail.map((d) => d.msg).join("; ") : r.statusText;
    throw new Error(detail);
  }
  return body;
}

function setMessage(text, isError = false) {
  $("message").textContent = text;
  $("message").classList.toggle("error", isError);
}

function fmt(x) { return x.toFixed(3); }

async function search(q, push = true) {
  state.q = q.trim();
  state.like = null;
  $("q").value = state.q;
  if (push) {
    const url = new URL(location.href);
    url.searchParams.delete("id");
    url.searchParams.delete("like");
    if (state.q) url.searchParams.set("q", state.q); else url.searchParams.delete("q");
    history.pushState({}, "", url);
  }
  $("results").replaceChildren();
  $("mapping").replaceChildren();
  state.marks.clear();
  $("feedback").hidden = true;
  if (!state.q) { setMessage("Type words to search the pictures."); return; }
  setMessage("Searching…");
  try {
    const res = await api(`/api/search?q=${encodeURIComponent(state.q)}&k=60`);
    state.hits = res.hits;
    const terms = res.mapping.filter((m) => m.how !== "unknown")
      .map((m) => (m.weight < 0 ? "−" : "") + m.term + (Math.abs(m.weight) !== 1 ? `^${Math.abs(m.weight)}` : ""));
    // a query of filters alone (place:kyoto, a place clicked) has no terms: say the query
    let msg = `${res.hits.length} of ${res.pictures} pictures for “${terms.join(" ") || state.q}”`;
    // the calibrated count (pamir.calibration); none where the query has no probability
    if (res.likely !== null && res.likely !== undefined) {
      msg += ` — ${res.likely} likely relevant (probability ≥ ${res.likely_probability})`;
    }
    if (!res.hits.length && res.options.p_floor !== null && res.options.p_floor !== undefined) {
      msg = `Nothing relevant: no picture is relevant with a probability of ${res.options.p_floor} or more`;
    } else if (!res.hits.length && res.options.floor !== null) {
      msg = `Nothing relevant: no picture scores at least ${res.options.floor}`;
    }
    const unknown = res.mapping.filter((m) => m.how === "unknown");
    if (unknown.length) msg += ` — not in the vocabulary, ignored: ${unknown.map((m) => m.term).join(", ")}`;
    setMessage(msg);
    showMapping(res.mapped);
    $("results").replaceChildren(...withLikelyDivider(res.hits.map(hitCard), res));
  } catch (e) {
    setMessage(e.message, true);
  }
}

// The likely relevant pictures come first (by score, or by date with sort:date); a line
// after them says where the less likely ones start.
function withLikelyDivider(cards, res) {
  const n = res.hits.filter((h) => h.likely).length;
  if (res.likely === null || res.likely === undefined || n === cards.length
      || !res.hits.slice(0, n).every((h) => h.likely)) return cards;  // not likely-first
  const line = document.createElement("div");
  line.className = "likely-divider";
  line.textContent = n ? `${res.likely} likely relevant above; less likely below`
    : "no picture is likely relevant: the best matches, less likely";
  return [...cards.slice(0, n), line, ...cards.slice(n)];
}

function showMapping(lines) {
  $("mapping").replaceChildren(...lines.map((line) => {
    const li = document.createElement("li");
    li.textContent = line;
    return li;
  }));
}

async function moreLike(id, push = true) {
  state.like = id;
  state.q = "";
  $("q").value = "";
  if (push) {
    const url = new URL(location.href);
    url.searchParams.delete("q");
    url.searchParams.delete("id");
    url.searchParams.set("like", id);
    history.pushState({}, "", url);
  }
  if (!$("detail").hidden) closeDetail(false);
  state.marks.clear();
  $("feedback").hidden = true;
  $("results").replaceChildren();
  $("mapping").replaceChildren();
  setMessage("Finding similar pictures…");
  try {
    const res = await api(`/api/pictures/${id}/similar?k=60`);
    state.hits = res.hits;
    setMessage(`${res.hits.length} pictures like ${res.like.name} (nearest in the model's text space)`);
    $("results").replaceChildren(...res.hits.map(hitCard));
  } catch (e) {
    setMessage(e.message, true);
  }
}

function hitCard(hit) {
  const card = document.createElement("div");
  card.className = "hit";
  card.dataset.id = hit.id;
  const b = document.createElement("button");
  b.className = "open";
  b.title = hit.path;
  const img = document.createElement("img");
  img.src = `${hit.thumbnail}?size=256`;
  img.alt = hit.name;
  img.loading = "lazy";
  const meta = document.createElement("div");
  meta.className = "meta";
  meta.innerHTML = `<span class="name"></span><span class="score"></span>`;
  meta.querySelector(".name").textContent = hit.name;
  meta.querySelector(".score").textContent = heldLabel(hit) || fmt(hit.score);
  if (hit.probability !== undefined) {  // calibrated: the chance the picture is relevant
    const chance = document.createElement("span");
    chance.className = "probability" + (hit.likely ? " likely" : "");
    chance.textContent = `${Math.round(100 * hit.probability)}%`;
    chance.title = "calibrated probability that the picture is relevant";
    meta.append(chance);
  }
  if (hit.taken) {  // the date taken, from the picture's EXIF/XMP (else its file date)
    const when = document.createElement("span");
    when.className = "taken";
    when.textContent = hit.taken.slice(0, 10);
    meta.append(when);
  }
  const where = placeSpan(hit);  // places.js: the place it was taken, beside the date
  if (where) meta.append(where);
  const copies = typeof foldedSpan === "function" ? foldedSpan(hit) : null;  // duplicates.js
  if (copies) meta.append(copies);
  if (hit.caption && hit.caption.length) b.title = `${hit.path}\n${hit.caption.join(", ")}`;
  videoCard(hit, img, meta);  // video.js: its best frame and time
  b.append(img, meta);
  b.addEventListener("click", () => openDetail(hit.id));
  card.append(b);
  if (state.q) card.append(markButtons(hit.id, card));
  paintMark(card);
  return card;
}

// Relevance feedback: marks for the current query; every change re-ranks at once.
function markButtons(id, card) {
  const bar = document.createElement("div");
  bar.className = "marks";
  for (const [kind, label, title] of [["right", "✓", "right for this query"],
                                      ["wrong", "✗", "wrong for this query"]]) {
    const m = document.createElement("button");
    m.className = `mark mark-${kind}`;
    m.textContent = label;
    m.title = title;
    m.type = "button";
    m.addEventListener("click", (e) => {
      e.stopPropagation();
      if (state.marks.get(id) === kind) state.marks.delete(id); else state.marks.set(id, kind);
      paintMark(card);
      rerank();
    });
    bar.append(m);
  }
  return bar;
}

function paintMark(card) {
  const mark = state.marks.get(Number(card.dataset.id));
  card.classList.toggle("right", mark === "right");
  card.classList.toggle("wrong", mark === "wrong");
}

function judged() {
  const right = [], wrong = [];
  for (const [id, kind] of state.marks) (kind === "right" ? right : wrong).push(id);
  return { q: state.q, right, wrong, k: 60 };
}

async function post(url, body) {
  const r = await fetch(url, { method: "POST", body: JSON.stringify(body),
                               headers: { "content-type": "application/json" } });
  const out = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(typeof out.detail === "string" ? out.detail : r.statusText);
  return out;
}

async function rerank() {
  const body = judged();
  const bar = $("feedback");
  bar.hidden = !state.marks.size;
  $("keep").disabled = true;
  if (!body.right.length && !body.wrong.length) return;
  $("feedback-note").textContent = "Re-ranking…";
  try {
    const res = await post("/api/feedback", body);
    state.hits = res.hits;
    $("results").replaceChildren(...res.hits.map(hitCard));
    // PA learns from a right picture ranked above a wrong one: only then is there a
    // change to keep; one kind of mark alone re-ranks by nearness to the marked pictures.
    const learnt = res.changed_words.length > 0;
    $("feedback-note").textContent = `Re-ranked with ${res.right.length} right and ` +
      `${res.wrong.length} wrong` + (learnt
        ? ` (PA updates on ${res.changed_words.join(", ")}); not saved yet`
        : ": mark a right and a wrong picture to teach the model something to keep");
    $("keep").disabled = !learnt;
  } catch (e) {
    $("feedback-note").textContent = e.message;
  }
}

async function keep() {
  $("keep").disabled = true;
  $("feedback-note").textContent = "Saving the model…";
  try {
    const res = await post("/api/feedback/keep", judged());
    state.marks.clear();
    await search(state.q, false);
    $("feedback").hidden = false;
    $("feedback-note").textContent = `Kept: the model learnt from your marks (${res.kept.rescored} ` +
      `pictures rescored; the previous model is in ${res.kept.previous})`;
  } catch (e) {
    $("feedback-note").textContent = `Not kept: ${e.message}`;
  }
}

function clearMarks() {
  state.marks.clear();
  $("feedback").hidden = true;
  search(state.q, false);
}

async function openDetail(id, push = true) {
  if (push) {
    const url = new URL(location.href);
    url.searchParams.set("id", id);
    history.pushState({}, "", url);
  }
  $("detail").hidden = false;
  state.detailId = id;
  $("keywords").replaceChildren();
  $("explain-note").textContent = "";
  $("explain-voters").replaceChildren();
  clearCanvas();
  showText({});
  const img = $("detail-img");
  img.src = `/api/pictures/${id}/thumbnail?size=512`;
  try {
    const p = await api(`/api/pictures/${id}?k=8`);
    $("detail-name").textContent = p.name;
    $("detail-path").textContent = p.path;
    $("keywords").replaceChildren(...keywordItems(p.keywords));
    $("caption-box").hidden = !p.caption.length;
    $("caption").textContent = p.caption.join(", ") +
      (p.caption_source ? ` (from ${p.caption_source})` : "");
    $("detail-taken").textContent = [p.taken ? `taken ${p.taken.replace("T", " ")}` : "",
                                     placeOf(p), coloursOf(p)].filter(Boolean).join(" · ");
    showText(p);  // places.js: the text read on it, outlined
    videoDetail(p);  // video.js: a video plays from its hit's time
  } catch (e) {
    $("detail-name").textContent = e.message;
    return;
  }
  if (state.q) explain(id);
}

async function explain(id) {
  const note = $("explain-note");
  note.textContent = "Explaining…";
  try {
    const ex = await api(`/api/pictures/${id}/explain?q=${encodeURIComponent(state.q)}`);
    state.explanation = ex;
    note.textContent = explainText(ex);
    note.title = ex.exact;
    showVoters(ex);
    drawBlocks();
  } catch (e) {
    note.textContent = `No explanation: ${e.message}`;
  }
}

// "score 0.84 for “tiger” = cnn 0.41 + … + visterms 0.06, the sum of 290 cell and 77 block
// contributions": each view's part of the score, then how many places share it.
function explainText(ex) {
  const count = (kind) => ex.views.reduce((n, v) =>
    n + (v.placed !== kind ? 0 : kind === "cells" ? v.cells.length : v.blocks), 0);
  const cells = count("cells"), blocks = count("blocks");
  const places = [cells && `${cells} cell`, blocks && `${blocks} block`].filter(Boolean)
    .join(" and ");
  const parts = ex.views.length > 1 ?
    ex.views.map((v) => `${v.name} ${fmt(v.score)}`).join(" + ") + ", " : "";
  const unplaced = ex.unplaced ? `; ${fmt(ex.unplaced)} of it has no place on the picture` : "";
  return `score ${fmt(ex.score)} for “${ex.words.join(" ")}” = ${parts}the sum of ` +
    `${places} contributions${unplaced}`;
}

// The neighbour part of a mixed model: the captioned pictures that voted for the query's
// words, with their share of the vote (thumbnails for those the index holds).
function showVoters(ex) {
  const box = $("explain-voters");
  box.replaceChildren();
  if (!ex.voters || !ex.voters.length) return;
  const head = document.createElement("p");
  head.className = "muted";
  head.textContent = `The map explains the linear part (weight ${(1 - ex.neighbour_weight).toFixed(1)}); ` +
    `the neighbour vote (weight ${ex.neighbour_weight.toFixed(1)}) came from these captioned pictures:`;
  box.append(head);
  for (const v of ex.voters) {
    const fig = document.createElement("figure");
    if (v.picture != null) {
      const img = document.createElement("img");
      img.src = `/api/pictures/${v.picture}/thumbnail?size=96`;
      img.alt = v.path;
      fig.append(img);
    }
    const cap = document.createElement("figcaption");
    cap.textContent = `${Math.round(100 * v.weight)}% · ${v.words.join(" ")}`;
    cap.title = v.path;
    fig.append(cap);
    box.append(fig);
  }
}

function clearCanvas() {
  state.explanation = null;
  const c = $("detail-canvas");
  c.getContext("2d").clearRect(0, 0, c.width, c.height);
}

// The server's heat map (score per cell of a grid over the picture, CNN cells and visterm
// blocks merged) drawn as a smoothed overlay: red raises the score, blue lowers it, the
// strongest cell at 60 % opacity.
function drawBlocks() {
  const ex = state.explanation, img = $("detail-img"), c = $("detail-canvas");
  if (!ex || !img.complete || !img.naturalWidth) return;
  c.width = img.clientWidth; c.height = img.clientHeight;
  const ctx = c.getContext("2d");
  ctx.clearRect(0, 0, c.width, c.height);
  if (!$("show-blocks").checked) return;
  const { rows, cols, values } = ex.heat;
  const flat = values.flat();
  const top = flat.reduce((m, v) => Math.max(m, Math.abs(v)), 1e-12);
  const small = document.createElement("canvas");
  small.width = cols; small.height = rows;
  const pixels = small.getContext("2d").createImageData(cols, rows);
  flat.forEach((v, i) => {
    pixels.data.set(v >= 0 ? [230, 25, 25] : [25, 80, 230], 4 * i);
    pixels.data[4 * i + 3] = Math.round(255 * 0.6 * Math.abs(v) / top);
  });
  small.getContext("2d").putImageData(pixels, 0, 0);
  ctx.imageSmoothingEnabled = true;
  ctx.imageSmoothingQuality = "high";
  ctx.drawImage(small, 0, 0, c.width, c.height);
}

function closeDetail(push = true) {
  $("detail").hidden = true;
  clearCanvas();
  if (push) {
    const url = new URL(location.href);
    url.searchParams.delete("id");
    history.pushState({}, "", url);
  }
}

function keywordItems(keywords) {
  return keywords.map((k) => {
    const li = document.createElement("li");
    li.innerHTML = `<span class="kw"></span><span class="kw-score"></span>`;
    li.querySelector(".kw").textContent = k.shown || k.word;
    // ImageNet's words (no captions needed) carry their classes' probability, not a score;
    // a place or a word read on the picture is a fact: its kind says so
    const fact = k.source === "place" || k.source === "text";
    li.querySelector(".kw-score").textContent = fact ? k.source : k.source === "imagenet"
      ? `ImageNet ${Math.round(100 * k.probability)} %`
      : fmt(k.score) + (k.probability !== undefined ? ` · ${Math.round(100 * k.probability)} %` : "");
    if (k.source === "imagenet" || fact) li.className = k.source;
    return li;
  });
}

async function annotateUpload(file) {
  $("annotation").hidden = false;
  $("annotation-img").src = URL.createObjectURL(file);
  $("annotation-name").textContent = `${file.name}: annotating…`;
  $("annotation-words").replaceChildren();
  try {
    const r = await fetch("/api/annotate?k=8", { method: "POST", body: file,
      headers: { "content-type": file.type || "application/octet-stream" } });
    const body = await r.json();
    if (!r.ok) throw new Error(typeof body.detail === "string" ? body.detail : r.statusText);
    $("annotation-name").textContent = file.name;
    $("annotation-words").replaceChildren(...keywordItems(body.keywords));
  } catch (e) {
    $("annotation-name").textContent = `${file.name}: ${e.message}`;
  }
}

function fromUrl() {
  const params = new URLSearchParams(location.search);
  const q = params.get("q") || "";
  const like = params.get("like");
  if (like) { if (String(state.like) !== like) moreLike(like, false); }
  else if (q !== state.q || state.like || !$("results").children.length) search(q, false);
  const id = params.get("id");
  if (id) openDetail(id, false); else if (!$("detail").hidden) closeDetail(false);
}

$("search-form").addEventListener("submit", (e) => { e.preventDefault(); search($("q").value); });
$("close").addEventListener("click", () => closeDetail());
$("more-like").addEventListener("click", () => moreLike(state.detailId));
$("keep").addEventListener("click", keep);
$("clear-marks").addEventListener("click", clearMarks);
$("detail").addEventListener("click", (e) => { if (e.target === $("detail")) closeDetail(); });
document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("detail").hidden) closeDetail(); });
$("detail-img").addEventListener("load", drawBlocks);
$("show-blocks").addEventListener("change", drawBlocks);
window.addEventListener("resize", drawBlocks);
$("detail-img").addEventListener("load", fitText);
$("show-text").addEventListener("change", fitText);
window.addEventListener("resize", fitText);
window.addEventListener("popstate", fromUrl);
$("upload").addEventListener("change", (e) => { if (e.target.files[0]) annotateUpload(e.target.files[0]); });
$("annotation-close").addEventListener("click", () => { $("annotation").hidden = true; });

api("/api/status").then((s) => {
  $("status").textContent = `${s.pictures.toLocaleString()} pictures · ${s.vocabulary} words`;
  document.body.classList.toggle("no-feedback", s.feedback === false);  // a bare folder: 409
}).catch(() => {});
api("/api/vocabulary").then((v) => {
  $("vocabulary").replaceChildren(...v.words.map((w) => Object.assign(document.createElement("option"), { value: w })));
}).catch(() => {});
loadPlaces();
fromUrl();
