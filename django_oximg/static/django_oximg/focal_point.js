/* django-oximg: set a focal point by clicking the image preview.
 *
 * FocalPointWidget renders, for each field,
 *   <div data-oximg-focal>
 *     <div class="oximg-focal-frame"><img class="oximg-focal-image"><span class="oximg-focal-marker"></span></div>
 *     <input class="oximg-focal-input" value="x,y">
 *   </div>
 * A click on the image writes "x,y" (fractions 0..1 of the image as shown,
 * four decimals) into the input, which is what the form submits and
 * validates; typing in the input moves the marker. Without this script the
 * text input works on its own. Plain JavaScript, no build step.
 */
(function () {
  "use strict";

  var POINT = /^\s*([0-9.]+)\s*,\s*([0-9.]+)\s*$/;

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

  function setUp(widget) {
    var image = widget.querySelector(".oximg-focal-image");
    var marker = widget.querySelector(".oximg-focal-marker");
    var input = widget.querySelector("input");
    if (!image || !marker || !input || widget.dataset.oximgFocalReady) {
      return;
    }
    widget.dataset.oximgFocalReady = "1";
    showMarker(marker, parsePoint(input.value));
    image.addEventListener("click", function (event) {
      var box = image.getBoundingClientRect();
      if (!box.width || !box.height) {
        return;
      }
      input.value =
        rounded((event.clientX - box.left) / box.width) +
        "," +
        rounded((event.clientY - box.top) / box.height);
      showMarker(marker, parsePoint(input.value));
      input.dispatchEvent(new Event("change", { bubbles: true }));
    });
    input.addEventListener("input", function () {
      showMarker(marker, parsePoint(input.value));
    });
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
