//! The communication matrix: `M(u, v)` = bytes rank `u` sent to rank `v`, the input of the grouping of chapter 4
//! (T:941, `guermouche-2011-thesis-send-determinism-hydee.txt` line 941: "M(u, v) est le volume des données envoyés
//! du processus u au processus v").
//!
//! Its file format is a headerless CSV of P lines of P comma-separated numbers, row `u` column `v` holding
//! `M(u, v)`, ranks numbered from 0 — the format the transport dumps its per-peer counters in. Parsing is strict:
//! every row as long as the first, as many rows as columns, every cell a non-negative finite number; blank lines at
//! the end are ignored, anything else is a typed error naming the row and column.

use crate::{Error, Rank, Result};

/// A P × P matrix of bytes sent.
#[derive(Clone, Debug, PartialEq)]
pub struct CommMatrix {
    /// P.
    ranks: usize,
    /// Row-major, `bytes[u * ranks + v]` = bytes `u` sent to `v`; every value finite and non-negative.
    bytes: Vec<f64>,
}

impl CommMatrix {
    /// A matrix from its row-major values.
    pub fn new(ranks: usize, bytes: Vec<f64>) -> Result<CommMatrix> {
        if ranks == 0 {
            return Err(Error::MatrixEmpty);
        }
        if bytes.len() != ranks * ranks {
            return Err(Error::MatrixNotSquare { rows: bytes.len() / ranks, cols: ranks });
        }
        if let Some((i, v)) = bytes.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
            return Err(Error::MatrixValue { row: i / ranks, col: i % ranks, text: v.to_string() });
        }
        Ok(CommMatrix { ranks, bytes })
    }

    /// A matrix from a function of `(u, v)`.
    pub fn from_fn(ranks: usize, mut f: impl FnMut(Rank, Rank) -> f64) -> Result<CommMatrix> {
        let mut bytes = Vec::with_capacity(ranks * ranks);
        for u in 0..ranks {
            for v in 0..ranks {
                bytes.push(f(u as Rank, v as Rank));
            }
        }
        CommMatrix::new(ranks, bytes)
    }

    /// Parses the CSV format described in the module documentation.
    ///
    /// ```
    /// use nemesis_ft::matrix::CommMatrix;
    /// let m = CommMatrix::from_csv("0,10\n3,0\n")?;
    /// assert_eq!(m.get(0, 1), 10.0);
    /// assert!(CommMatrix::from_csv("0,1\n2\n").is_err());
    /// # Ok::<(), nemesis_ft::Error>(())
    /// ```
    pub fn from_csv(text: &str) -> Result<CommMatrix> {
        let mut lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        if lines.is_empty() {
            return Err(Error::MatrixEmpty);
        }
        let expected = lines[0].split(',').count();
        let mut bytes = Vec::with_capacity(expected * lines.len());
        for (row, line) in lines.iter().enumerate() {
            let cells: Vec<&str> = line.split(',').collect();
            if cells.len() != expected {
                return Err(Error::MatrixRagged { row, len: cells.len(), expected });
            }
            for (col, cell) in cells.iter().enumerate() {
                let text = cell.trim();
                let value: f64 = text
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| Error::MatrixValue { row, col, text: text.to_string() })?;
                bytes.push(value);
            }
        }
        if lines.len() != expected {
            return Err(Error::MatrixNotSquare { rows: lines.len(), cols: expected });
        }
        CommMatrix::new(expected, bytes)
    }

    /// The CSV text of the matrix (integers printed without a fraction).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for u in 0..self.ranks {
            for v in 0..self.ranks {
                if v > 0 {
                    out.push(',');
                }
                out.push_str(&self.bytes[u * self.ranks + v].to_string());
            }
            out.push('\n');
        }
        out
    }

    /// P.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Bytes `u` sent to `v` (0 out of range).
    pub fn get(&self, u: Rank, v: Rank) -> f64 {
        let (u, v) = (u as usize, v as usize);
        if u < self.ranks && v < self.ranks { self.bytes[u * self.ranks + v] } else { 0.0 }
    }

    /// Total volume `D = Σ M(u, v)`.
    pub fn total(&self) -> f64 {
        self.bytes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_back() {
        let m = CommMatrix::from_csv("0, 5,1.5\r\n2,0,0\n0,7,0\n\n\n").unwrap();
        assert_eq!(m.ranks(), 3);
        assert_eq!(m.get(0, 1), 5.0);
        assert_eq!(m.get(0, 2), 1.5);
        assert_eq!(m.total(), 15.5);
        assert_eq!(CommMatrix::from_csv(&m.to_csv()).unwrap(), m);
    }

    #[test]
    fn bad_input_names_the_cell() {
        assert!(matches!(CommMatrix::from_csv(""), Err(Error::MatrixEmpty)));
        assert!(matches!(CommMatrix::from_csv("\n \n"), Err(Error::MatrixEmpty)));
        assert!(matches!(CommMatrix::from_csv("0,1\n1\n"), Err(Error::MatrixRagged { row: 1, len: 1, expected: 2 })));
        assert!(matches!(CommMatrix::from_csv("0,1,2\n1,0,2\n"), Err(Error::MatrixNotSquare { rows: 2, cols: 3 })));
        match CommMatrix::from_csv("0,1\nx,0\n") {
            Err(Error::MatrixValue { row: 1, col: 0, text }) => assert_eq!(text, "x"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(CommMatrix::from_csv("0,-1\n1,0\n"), Err(Error::MatrixValue { .. })));
        assert!(matches!(CommMatrix::from_csv("0,inf\n1,0\n"), Err(Error::MatrixValue { .. })));
        assert!(matches!(CommMatrix::from_csv("0,NaN\n1,0\n"), Err(Error::MatrixValue { .. })));
        assert!(matches!(CommMatrix::from_csv("0,1\n\n1,0\n"), Err(Error::MatrixRagged { row: 1, .. })));
        assert!(CommMatrix::new(2, vec![0.0; 3]).is_err());
    }
}
