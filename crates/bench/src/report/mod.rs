//! The outputs of a run: the text table, the JSON document, the SVG charts.

pub mod json;
pub mod svg;
pub mod table;
