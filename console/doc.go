// Package console is weir's web console: the pages a browser shows for the
// jobs list (/), a job (/jobs/{id_or_name}), a name's lineage
// (/lineage/{name}), an update preview (/jobs/{id_or_name}/update), the
// topics and subscriptions (/topics) and the schedules of partition runs
// (/schedules, and /schedules/{name} with its partition grid). The pages are plain HTML, CSS and
// JavaScript modules embedded in the binary (no build step, no framework,
// no vendored library); everything they show they read from the JSON API
// of the same process, with the API's own authentication: when the API
// answers 401 the page asks for a token, keeps it in the tab's
// sessionStorage and sends it as Authorization: Bearer.
//
// Mount puts the pages beside the API: GET and HEAD requests for a console
// path go to the pages' handler, everything else to the API's. Package
// server mounts it in `weir server` and in every Go program built with
// weirx, with the pages behind a guard that keeps the Host and Origin
// checks but asks no token (the pages hold no data; the API calls they
// make do).
//
// It may import the standard library.
package console
