//! Markdown tables, written a row at a time.

use std::fmt::{Display, Write as _};

/// How a column's cells sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A Markdown table: the heading row and the alignment row, then a row per
/// [`Table::row`].
#[derive(Debug)]
pub struct Table {
    text: String,
}

impl Table {
    /// A table of `columns`, each a heading and its alignment.
    pub fn new<H: Display>(columns: impl IntoIterator<Item = (H, Align)>) -> Self {
        let (headings, aligns): (Vec<String>, Vec<Align>) = columns
            .into_iter()
            .map(|(heading, align)| (heading.to_string(), align))
            .unzip();
        let mut table = Self {
            text: String::new(),
        };
        table.row(headings);
        table.text.push('|');
        for align in aligns {
            table.text.push_str(match align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        table.text.push('\n');
        table
    }

    pub fn row<C: Display>(&mut self, cells: impl IntoIterator<Item = C>) {
        self.text.push('|');
        for cell in cells {
            let _ = write!(self.text, " {cell} |");
        }
        self.text.push('\n');
    }

    /// The table's text, each row ending in a newline.
    pub fn text(&self) -> &str {
        &self.text
    }
}
