/* The inbox list refreshes itself (docs/web.md, "Pages that refresh themselves").
 *
 * The watcher (#inbox-watch) is replaced every few seconds by /live/inbox/, which says whether
 * the pending proposals differ from those the list was shown with (data-stale). Then, when the
 * person is doing nothing with the list, the list (search bar, actions, rows, pages) is fetched
 * again from this very address — its filters, search and order kept — and swapped in place; when
 * rows are ticked, an action is chosen or a search is being typed, nothing is swapped and the
 * watcher's banner says what arrived and what "Show them" will do.
 */
(function () {
  "use strict";

  var LIST = "#changelist .changelist-form-container";

  function busy() {
    if (document.querySelector("#changelist-form input.action-select:checked, #action-toggle:checked")) {
      return true;
    }
    var action = document.querySelector("#changelist-form select[name=action]");
    if (action && action.value) {
      return true;
    }
    var search = document.getElementById("searchbar");
    return Boolean(search && (search.value !== search.defaultValue || document.activeElement === search));
  }

  function refresh() {
    window.htmx.ajax("GET", window.location.href, {target: LIST, select: LIST, swap: "outerHTML"}).then(function () {
      // Django's actions.js binds the new rows' checkboxes, as it did the first ones at load.
      var boxes = document.querySelectorAll("tr input.action-select");
      if (boxes.length && window.Actions) {
        window.Actions(boxes);
      }
    });
  }

  document.addEventListener("htmx:afterSettle", function () {
    var watch = document.getElementById("inbox-watch");
    if (!watch || watch.dataset.stale !== "true" || watch.dataset.seen) {
      return;
    }
    watch.dataset.seen = "true";
    if (!busy()) {
      refresh();
      return;
    }
    var news = document.getElementById("inbox-news");
    var show = document.getElementById("inbox-show");
    show.href = window.location.href;
    news.hidden = false;
  });
})();
