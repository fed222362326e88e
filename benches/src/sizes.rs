//! Message sizes: parsing them from the command line (`4096`, `64K`, `1M`) and the schedule of
//! `shared/bench/mpi_pingpong.c` (0 or 1, then doubling up to a maximum), which every system of
//! `compare` runs so that all figures are for the same sizes.

/// Parses a byte count: digits with an optional binary suffix `K`, `M` or `G` (`KiB`, `MiB`,
/// `GiB` too), e.g. `4096`, `64K`, `1M`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits);
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" | "kb" => 10,
        "m" | "mib" | "mb" => 20,
        "g" | "gib" | "gb" => 30,
        _ => return Err(format!("`{s}`: expected a byte count such as 4096, 64K or 1M")),
    };
    let n: usize = num.parse().map_err(|_| format!("`{s}`: expected a byte count such as 4096, 64K or 1M"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}`: too large"))
}

/// The sizes `mpi_pingpong.c` runs up to `max`: `0, 1, 2, 4, ...` (from 1 when `from_zero` is
/// false, as its bandwidth test does), doubling while not above `max`.
pub fn doubling(max: usize, from_zero: bool) -> Vec<usize> {
    let mut v = if from_zero { vec![0] } else { Vec::new() };
    let mut s = 1usize;
    while s <= max {
        v.push(s);
        match s.checked_mul(2) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// `n` bytes for people: `512`, `4K`, `64K+1`, `1M`.
pub fn human(n: usize) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        let u = 1usize << shift;
        if n >= u {
            let (q, r) = (n / u, n % u);
            return match r {
                0 => format!("{q}{unit}"),
                r if r <= 8 => format!("{q}{unit}+{r}"),
                _ => n.to_string(),
            };
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_with_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn doubling_schedule_as_mpi_pingpong() {
        assert_eq!(doubling(8, true), vec![0, 1, 2, 4, 8]);
        assert_eq!(doubling(10, false), vec![1, 2, 4, 8]);
        assert_eq!(doubling(0, true), vec![0]);
        assert_eq!(doubling(0, false), Vec::<usize>::new());
        assert_eq!(doubling(usize::MAX, false).len(), usize::BITS as usize);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512");
        assert_eq!(human(65536), "64K");
        assert_eq!(human(65537), "64K+1");
        assert_eq!(human(3 << 20), "3M");
        assert_eq!(human(1500), "1500");
    }
}
