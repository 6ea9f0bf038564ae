// Videos on the page (pamir.server.video): a hit on a video shows its best frame for the
// query with its time, and the detail plays the video from that time (#t=, which the
// server's range requests let the browser seek to).
const videoTimes = new Map();  // picture id -> its best frame's time for the last query

function clockText(seconds) {
  const s = Math.round(seconds || 0);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return s >= 3600 ? `${Math.floor(s / 3600)}:${mm}:${ss}` : `${mm}:${ss}`;
}

// A hit card's picture becomes the video's best frame, with a "▶ 01:15" badge.
function videoCard(hit, img, meta) {
  if (!hit.video) return;
  const t = hit.time ?? 0;
  videoTimes.set(hit.id, t);
  img.src = `${hit.thumbnail}?size=256&t=${t}`;
  const badge = document.createElement("span");
  badge.className = "video-time";
  badge.textContent = `▶ ${clockText(t)}`;
  badge.title = "a video: its best frame for the query";
  meta.append(badge);
}

// The detail of a video: a <video> playing from the hit's time in place of the picture.
function videoDetail(p) {
  const img = document.getElementById("detail-img");
  const old = document.getElementById("detail-video");
  if (old) old.remove();
  img.hidden = false;
  if (!p.video) return;
  const t = videoTimes.get(p.id) ?? 0;
  const v = document.createElement("video");
  v.id = "detail-video";
  v.controls = true;
  v.preload = "metadata";
  v.poster = `/api/pictures/${p.id}/thumbnail?size=512&t=${t}`;
  v.src = `${p.video}#t=${t}`;
  img.hidden = true;
  img.after(v);
}
