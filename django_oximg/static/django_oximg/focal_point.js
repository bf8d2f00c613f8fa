/* django-oximg: set a focal point by clicking the image preview.
 *
 * FocalPointWidget renders, for each field,
 *   <div data-oximg-focal>
 *     <div class="oximg-focal-frame"><img class="oximg-focal-image"><span class="oximg-focal-marker"></span></div>
 *     <div class="oximg-focal-controls"><label>…</label> <input value="x,y"> <p>…</p></div>
 *     <div class="oximg-focal-sizes" hidden>
 *       <figure class="oximg-focal-size" data-width="320" data-height="240">
 *         <div class="oximg-focal-crop"><img></div><figcaption>…</figcaption>
 *       </figure>…
 *     </div>
 *   </div>
 * A click on the image writes "x,y" (fractions 0..1 of the image as shown,
 * four decimals) into the input, which is what the form submits and
 * validates; typing in the input moves the marker. Each size's preview is
 * the same image in a box of the size's aspect ratio, cut around the point
 * as the server cuts it (imgproxy's g:fp: the box centred on the point, kept
 * inside the image), with CSS object-fit and object-position; without a
 * point, centred. Without this script the text input works on its own.
 * Plain JavaScript, no build step.
 */
(function () {
  "use strict";

  var POINT = /^\s*([0-9.]+)\s*,\s*([0-9.]+)\s*$/;
  var CENTRE = { x: 0.5, y: 0.5 };

  function parsePoint(text) {
    var match = POINT.exec(text || "");
    if (!match) {
      return null;
    }
    var x = parseFloat(match[1]);
    var y = parseFloat(match[2]);
    if (!(x >= 0 && x <= 1 && y >= 0 && y <= 1)) {
      return null;
    }
    return { x: x, y: y };
  }

  function rounded(value) {
    var clamped = Math.min(1, Math.max(0, value));
    return String(Math.round(clamped * 10000) / 10000);
  }

  function showMarker(marker, point) {
    if (point === null) {
      marker.hidden = true;
      return;
    }
    marker.style.left = point.x * 100 + "%";
    marker.style.top = point.y * 100 + "%";
    marker.hidden = false;
  }

  /* object-position along one axis: the image, scaled to cover the box, is
   * `ratio` times as long as the box; the box is centred on `at` (0..1 of
   * the image) and kept inside it. object-position p places the image's
   * point p at the box's point p, so the box starts at p * (ratio - 1). */
  function along(at, ratio) {
    if (ratio <= 1) {
      return 0.5;
    }
    return Math.min(1, Math.max(0, (at * ratio - 0.5) / (ratio - 1)));
  }

  function showCrops(widget, image, point) {
    var sizes = widget.querySelectorAll(".oximg-focal-size");
    // The fitted image's size, as the server made it (not as laid out).
    var imageAspect = image.getAttribute("width") / image.getAttribute("height");
    for (var i = 0; i < sizes.length; i++) {
      var boxAspect = sizes[i].dataset.width / sizes[i].dataset.height;
      var crop = sizes[i].querySelector("img");
      var x = along(point.x, imageAspect / boxAspect);
      var y = along(point.y, boxAspect / imageAspect);
      crop.parentNode.style.aspectRatio = sizes[i].dataset.width + " / " + sizes[i].dataset.height;
      crop.style.objectPosition = x * 100 + "% " + y * 100 + "%";
    }
  }

  function setUp(widget) {
    var image = widget.querySelector(".oximg-focal-image");
    var marker = widget.querySelector(".oximg-focal-marker");
    var input = widget.querySelector("input");
    var crops = widget.querySelector(".oximg-focal-sizes");
    if (!image || !marker || !input || widget.dataset.oximgFocalReady) {
      return;
    }
    widget.dataset.oximgFocalReady = "1";
    function show() {
      var point = parsePoint(input.value);
      showMarker(marker, point);
      showCrops(widget, image, point || CENTRE);
    }
    show();
    if (crops) {
      crops.hidden = false;
    }
    image.addEventListener("click", function (event) {
      var box = image.getBoundingClientRect();
      if (!box.width || !box.height) {
        return;
      }
      input.value =
        rounded((event.clientX - box.left) / box.width) +
        "," +
        rounded((event.clientY - box.top) / box.height);
      show();
      input.dispatchEvent(new Event("change", { bubbles: true }));
    });
    input.addEventListener("input", show);
  }

  function setUpAll() {
    var widgets = document.querySelectorAll("[data-oximg-focal]");
    for (var i = 0; i < widgets.length; i++) {
      setUp(widgets[i]);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUpAll);
  } else {
    setUpAll();
  }
  // The admin's inline formsets add rows later.
  document.addEventListener("formset:added", setUpAll);
})();
