//! The bytes of the MPI state image (`super::image`): little-endian fixed-width integers,
//! lengths before sequences, nothing else. A reader never trusts a length: it fails on the first
//! byte past the end (the file's MAC and checksum already vouch for the bytes; this keeps a bug
//! from becoming a panic).

/// Writes an image.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }

    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.u64(v as u64);
    }

    pub fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn u32s(&mut self, v: &[u32]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.u32(x));
    }

    pub fn i32s(&mut self, v: &[i32]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.i32(x));
    }

    pub fn i64s(&mut self, v: impl ExactSizeIterator<Item = i64>) {
        self.len(v.len());
        v.for_each(|x| self.i64(x));
    }
}

/// Reads an image; every method fails (with what it was reading) past the end.
pub struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

/// Why an image does not read.
pub type Bad = String;

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, at: 0 }
    }

    /// True once every byte was read.
    pub fn done(&self) -> bool {
        self.at == self.b.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} of {} (wanted {n})", self.at, self.b.len()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }

    pub fn bool(&mut self) -> Result<bool, Bad> {
        Ok(self.u8()? != 0)
    }

    pub fn u32(&mut self) -> Result<u32, Bad> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, Bad> {
        Ok(self.u32()? as i32)
    }

    pub fn u64(&mut self) -> Result<u64, Bad> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, Bad> {
        Ok(self.u64()? as i64)
    }

    /// A length of items of at least `min` bytes each: never more than the bytes left allow.
    pub fn len(&mut self, min: usize) -> Result<usize, Bad> {
        let n = self.u64()?;
        let left = (self.b.len() - self.at) as u64;
        if n.saturating_mul(min.max(1) as u64) > left {
            return Err(format!("a length of {n} at byte {} with {left} bytes left", self.at));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], Bad> {
        let n = self.len(1)?;
        self.take(n)
    }

    pub fn string(&mut self) -> Result<String, Bad> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|e| format!("a name: {e}"))
    }

    pub fn u32s(&mut self) -> Result<Vec<u32>, Bad> {
        let n = self.len(4)?;
        (0..n).map(|_| self.u32()).collect()
    }

    pub fn i32s(&mut self) -> Result<Vec<i32>, Bad> {
        let n = self.len(4)?;
        (0..n).map(|_| self.i32()).collect()
    }

    pub fn i64s(&mut self) -> Result<Vec<i64>, Bad> {
        let n = self.len(8)?;
        (0..n).map(|_| self.i64()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_a_short_image_fails() {
        let mut w = Writer::default();
        w.u8(7);
        w.bool(true);
        w.i32(-5);
        w.u64(1 << 40);
        w.str("row");
        w.u32s(&[1, 2]);
        w.i64s([-1i64, 3].into_iter());
        let mut r = Reader::new(&w.0);
        assert_eq!((r.u8(), r.bool(), r.i32(), r.u64()), (Ok(7), Ok(true), Ok(-5), Ok(1 << 40)));
        assert_eq!((r.string(), r.u32s(), r.i64s()), (Ok("row".into()), Ok(vec![1, 2]), Ok(vec![-1, 3])));
        assert!(r.done());
        let mut short = Reader::new(&w.0[..w.0.len() - 1]);
        let _ = (short.u8(), short.bool(), short.i32(), short.u64(), short.string(), short.u32s());
        assert!(short.i64s().is_err());
        // A huge length is refused before anything is allocated.
        let mut huge = Writer::default();
        huge.u64(u64::MAX);
        assert!(Reader::new(&huge.0).u32s().is_err());
    }
}
