// How far a running `pamir index` is (GET /api/progress, the record the indexer writes in
// the index folder): "indexing: 1,200 of 10,000 · reading text: 4,210 of 10,000 pictures" in
// the header while the passes run, each by the label and in the order the record gives. Asked
// every 2 s while they run, every 15 s otherwise (a run started later is seen); the pictures
// already indexed answer searches meanwhile.
"use strict";

function progressLine(record) {
  const parts = record.passes
    .filter((p) => p.total > 0 && p.done < p.total)
    .map((p) => `${p.label || p.name}: ${p.done.toLocaleString()} of ` +
                `${p.total.toLocaleString()}`);
  return parts.length ? `${parts.join(" · ")} pictures` : "";
}

async function pollProgress() {
  const box = document.getElementById("progress");
  let running = false;
  try {
    const record = await api("/api/progress");  // app.js's
    const line = record.running ? progressLine(record) : "";
    running = Boolean(line);
    box.textContent = line;
    box.hidden = !running;
  } catch (e) {
    box.hidden = true;  // the server is away: the next poll tries again
  }
  setTimeout(pollProgress, running ? 2000 : 15000);
}

pollProgress();
