// Fills each tile's caption (templates/gallery/stats.html) with what the
// browser received for the tile's image: the response body's bytes as sent
// and its type, from the Resource Timing entry of the URL the <img> shows
// (currentSrc: for a <picture>, the <source> and width the browser chose).
// Only the browser knows these for format="auto" and <picture>; for the
// other tiles they confirm the tag's t.format. The pixel size is the tag's
// t.width and t.height, except for a <picture>, where it is the chosen
// candidate's. Same-origin URLs, so the sizes are not hidden (cross-origin
// ones would need Timing-Allow-Origin).
"use strict";

function describeBytes(bytes) {
  return bytes < 1000 ? `${bytes} B` : `${(bytes / 1000).toFixed(1)} kB`;
}

// The file's width and height for an <img> shown from a srcset: its
// naturalWidth is in CSS pixels (the file's width over the density the
// browser chose), so the width is the chosen candidate's "w" descriptor, and
// the height follows from the <img>'s width and height attributes.
function chosenSize(img) {
  const offers = [img, ...img.parentElement.querySelectorAll("source")];
  for (const candidate of offers.flatMap((offer) => offer.srcset.split(","))) {
    const [url, descriptor] = candidate.trim().split(/\s+/);
    if (new URL(url, document.baseURI).href === img.currentSrc && descriptor?.endsWith("w")) {
      const width = parseInt(descriptor, 10);
      const ratio = img.getAttribute("height") / img.getAttribute("width");
      return `${width}×${Math.round(width * ratio)}`;
    }
  }
  return `${img.naturalWidth}×${img.naturalHeight}`;
}

function fill(img) {
  const stats = img.closest("figure")?.querySelector(".stats");
  const bytes = stats?.querySelector(".bytes");
  if (!bytes || bytes.dataset.bytes || !img.complete || !img.naturalWidth) {
    return;
  }
  const [entry] = performance.getEntriesByName(img.currentSrc);
  if (!entry) {
    return; // Not recorded yet: the observer below calls again when it is.
  }
  bytes.dataset.bytes = entry.encodedBodySize;
  bytes.textContent = describeBytes(entry.encodedBodySize);
  if (entry.contentType) {
    stats.querySelector(".format").textContent = entry.contentType.replace("image/", "").toUpperCase();
  }
  const size = stats.querySelector(".size");
  if (!size.textContent) {
    size.textContent = chosenSize(img);
  }
}

function fillAll() {
  document.querySelectorAll("figure img").forEach(fill);
}

for (const img of document.querySelectorAll("figure img")) {
  img.addEventListener("load", () => fill(img));
}
new PerformanceObserver(fillAll).observe({ type: "resource", buffered: true });
fillAll();
