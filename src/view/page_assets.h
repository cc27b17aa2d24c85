// The graph view page's inline stylesheet and script (written by us; the page loads nothing else).
#pragma once

namespace smelt::view::detail {

/// The page's CSS.
extern const char* const kPageStyle;

/// The page's JS. It expects `var D={...}` before it (see html_view.cpp for the fields) and the
/// page skeleton's elements; it lays out the expanded groups lazily, draws the SVG, and runs its
/// self-test when the URL has `?selftest`.
extern const char* const kPageScript;

}  // namespace smelt::view::detail
