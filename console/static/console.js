// rdq console: live refresh at the interval the person picks (paused while
// the tab is hidden or while they are typing in the live region), and the
// local time on hover of every UTC time, each cell of a list labelled
// with its column's heading for narrow screens, where lists are cards, and
// copy buttons for task ids.
// Everything works without it.
(function () {
  'use strict';
  document.documentElement.classList.add('js');
  var timer = null;

  function localTimes(root) {
    var els = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute('datetime'));
      if (!isNaN(d.getTime())) {
        els[i].title = 'Local time: ' + d.toLocaleString();
      }
    }
  }

  function labelCells(root) {
    var tables = root.querySelectorAll('table');
    for (var t = 0; t < tables.length; t++) {
      var heads = tables[t].querySelectorAll('thead th');
      if (!heads.length) continue;
      var rows = tables[t].querySelectorAll('tbody tr');
      for (var r = 0; r < rows.length; r++) {
        var cells = rows[r].children;
        if (cells.length !== heads.length) continue;
        for (var c = 0; c < cells.length; c++) {
          cells[c].setAttribute('data-label', heads[c].textContent.trim());
        }
      }
    }
  }

  function busy() {
    var live = document.getElementById('live');
    if (!live) return true;
    var a = document.activeElement;
    if (a && live.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    var fields = live.querySelectorAll('input:not([type=hidden]), textarea');
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === 'checkbox' || f.type === 'radio' ? f.checked : f.value !== '') return true;
    }
    return false;
  }

  function tick() {
    if (document.visibilityState === 'visible' && !busy() && window.htmx) {
      window.htmx.trigger(document.body, 'rdq-refresh');
    }
  }

  function schedule() {
    if (timer) clearInterval(timer);
    timer = null;
    var sel = document.getElementById('refresh');
    var s = sel ? parseInt(sel.value, 10) : 0;
    if (s > 0) timer = setInterval(tick, s * 1000);
  }

  document.addEventListener('DOMContentLoaded', function () {
    var sel = document.getElementById('refresh');
    if (sel) {
      var saved = null;
      try { saved = window.localStorage.getItem('rdq-refresh'); } catch (e) { saved = null; }
      if (saved !== null && sel.querySelector('option[value="' + saved.replace(/[^0-9]/g, '') + '"]')) sel.value = saved;
      sel.addEventListener('change', function () {
        try { window.localStorage.setItem('rdq-refresh', sel.value); } catch (e) { /* private mode */ }
        schedule();
      });
    }
    localTimes(document);
    labelCells(document);
    schedule();
  });
  // A Copy button puts its data-copy text (a task id) on the clipboard
  // and says so for a moment; delegated, so rows a refresh brings work too.
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest ? ev.target.closest('button[data-copy]') : null;
    if (!b || !navigator.clipboard) return;
    var label = b.textContent;
    navigator.clipboard.writeText(b.getAttribute('data-copy')).then(function () {
      b.textContent = 'Copied';
    }, function () {
      b.textContent = 'Copy failed';
    }).then(function () {
      setTimeout(function () { b.textContent = label; }, 1500);
    });
  });
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && timer) tick();
  });
  document.addEventListener('htmx:afterSettle', function (e) { localTimes(e.target); labelCells(e.target); });
})();
