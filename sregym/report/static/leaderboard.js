// Sortable tables and figure state for the sregym leaderboard. No dependencies.
// Click a column header to sort by it (again to reverse). ?sort=<column>&dir=asc|desc in the
// address sorts the first sortable table on load, so a sorted view can be linked.
(function () {
  "use strict";

  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    var raw = cell.getAttribute("data-value");
    if (raw === null) raw = cell.textContent.trim();
    var num = parseFloat(raw);
    return raw !== "" && !isNaN(num) && isFinite(raw) ? num : raw.toLowerCase();
  }

  function sortTable(table, index, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      // unknown values ("" from n/a) always sink to the bottom
      if (x === "" && y !== "") return 1;
      if (y === "" && x !== "") return -1;
      if (x < y) return descending ? 1 : -1;
      if (x > y) return descending ? -1 : 1;
      return 0;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) heads[i].removeAttribute("aria-sort");
    heads[index].setAttribute("aria-sort", descending ? "descending" : "ascending");
    table.setAttribute("data-sorted-by", heads[index].getAttribute("data-key") || String(index));
  }

  function wire(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, index) {
      th.addEventListener("click", function () {
        sortTable(table, index, th.getAttribute("aria-sort") !== "descending");
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var tables = document.querySelectorAll("table.sortable");
    Array.prototype.forEach.call(tables, wire);
    var params = new URLSearchParams(window.location.search);
    var key = params.get("sort");
    if (key && tables.length) {
      var th = tables[0].querySelector('th[data-key="' + key + '"]');
      if (th) sortTable(tables[0], th.cellIndex, params.get("dir") !== "asc");
    }
  });

  // A figure that fails to load says so instead of showing a broken-image icon.
  window.addEventListener("load", function () {
    Array.prototype.forEach.call(document.querySelectorAll("figure img"), function (img) {
      var ok = img.complete && img.naturalWidth > 0;
      img.closest("figure").setAttribute("data-state", ok ? "loaded" : "missing");
    });
  });
})();
