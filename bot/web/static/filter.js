// Narrows the proposal's table rows as the reader types, without a round trip. With scripts off,
// the same box is a GET form the server answers with the matching rows only.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("q");
  if (!box) { return; }
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.proposal"));
  var texts = tables.map(function (table) {
    return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
      return [row, row.textContent.toLowerCase()];
    });
  });
  var pending = 0;
  function apply() {
    var needle = box.value.trim().toLowerCase();
    tables.forEach(function (table, index) {
      var shown = 0;
      texts[index].forEach(function (pair) {
        var keep = !needle || pair[1].indexOf(needle) !== -1;
        pair[0].hidden = !keep;
        if (keep) { shown += 1; }
      });
      var count = table.closest(".section").querySelector(".count");
      if (count) { count.textContent = shown + " of " + count.dataset.total + " rows"; }
    });
  }
  box.addEventListener("input", function () {
    window.clearTimeout(pending);
    pending = window.setTimeout(apply, 80);
  });
});
