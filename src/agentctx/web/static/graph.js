// agentctx dashboard: pan and zoom for the server-drawn graph (moves the SVG viewBox).
// Drag pans, the wheel zooms around the pointer, the buttons zoom about the centre; a drag
// that moved does not count as a click, so panning never opens a record by accident.
"use strict";

(function () {
  const svg = document.getElementById("graph");
  if (!svg) return;
  const full = svg.viewBox.baseVal;
  const home = { x: full.x, y: full.y, w: full.width, h: full.height };
  let view = { ...home };
  const labels = document.getElementById("labels");
  const LABEL_ZOOM = 2.5; // show labels once zoomed in this far (unless the box says so)

  function apply() {
    svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
    const zoom = home.w / view.w;
    const wanted = labels ? labels.checked : false;
    svg.classList.toggle("labels", wanted || zoom >= LABEL_ZOOM);
  }

  function point(clientX, clientY) {
    const ctm = svg.getScreenCTM();
    if (!ctm) return { x: view.x + view.w / 2, y: view.y + view.h / 2 };
    const p = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
    return { x: p.x, y: p.y };
  }

  function zoomAt(factor, at) {
    const w = Math.min(home.w * 4, Math.max(home.w / 200, view.w / factor));
    const h = (w * view.h) / view.w;
    view = {
      x: at.x - ((at.x - view.x) * w) / view.w,
      y: at.y - ((at.y - view.y) * h) / view.h,
      w: w,
      h: h,
    };
    apply();
  }

  function centre() {
    return { x: view.x + view.w / 2, y: view.y + view.h / 2 };
  }

  svg.addEventListener(
    "wheel",
    (event) => {
      event.preventDefault();
      zoomAt(Math.exp(-event.deltaY * 0.0015), point(event.clientX, event.clientY));
    },
    { passive: false }
  );

  let drag = null;
  let moved = false;
  svg.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    drag = { start: point(event.clientX, event.clientY), x: event.clientX, y: event.clientY };
    moved = false;
  });
  window.addEventListener("pointermove", (event) => {
    if (!drag) return;
    if (!moved && Math.hypot(event.clientX - drag.x, event.clientY - drag.y) < 4) return;
    if (!moved) svg.setPointerCapture?.(event.pointerId);
    moved = true;
    svg.classList.add("dragging");
    const now = point(event.clientX, event.clientY);
    view.x -= now.x - drag.start.x;
    view.y -= now.y - drag.start.y;
    apply();
  });
  window.addEventListener("pointerup", () => {
    drag = null;
    svg.classList.remove("dragging");
  });
  svg.addEventListener(
    "click",
    (event) => {
      if (moved) {
        event.preventDefault();
        event.stopPropagation();
        moved = false;
      }
    },
    true
  );

  document.querySelectorAll("[data-zoom]").forEach((button) => {
    button.addEventListener("click", () => {
      const how = button.dataset.zoom;
      if (how === "in") zoomAt(1.5, centre());
      else if (how === "out") zoomAt(1 / 1.5, centre());
      else {
        view = { ...home };
        apply();
      }
    });
  });
  if (labels) labels.addEventListener("change", apply);

  // ?focus=<record id>: start zoomed in on that record.
  const focus = svg.dataset.focus;
  const node = focus ? svg.querySelector(`[data-id="${CSS.escape(focus)}"]`) : null;
  if (node) {
    const box = node.getBBox();
    const w = Math.min(home.w, Math.max(400, home.w / 6));
    const h = (w * home.h) / home.w;
    view = { x: box.x + box.width / 2 - w / 2, y: box.y + box.height / 2 - h / 2, w: w, h: h };
  }
  apply();
})();
