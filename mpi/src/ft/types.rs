//! Derived datatypes in the MPI state image (`super::image`): each descriptor is saved whole —
//! its layout (runs, bounds, size) and its recipe (`MPI_Type_get_contents`'s combiner,
//! arguments and the descriptors it was built from, recursively) — and read back as the same
//! values. This is exact by construction (nothing is recomputed, so a restored type packs,
//! reduces and answers `MPI_Type_get_envelope`/`_contents` exactly as before) and needs no
//! constructor per combiner. A predefined type inside a recipe is saved as its handle and
//! resolved to this process's shared descriptor.

use std::sync::Arc;

use super::wire::{Bad, Reader, Writer};
use crate::abi::{Aint, Count};
use crate::datatype::desc::{Contents, Run, TypeDesc};
use crate::datatype::{Entry, predefined_desc};

/// Deepest recipe read back (types built from types...): a bound on the reader's recursion.
const DEPTH: usize = 1000;

fn put_opt(w: &mut Writer, v: Option<i32>) {
    w.bool(v.is_some());
    w.i32(v.unwrap_or(0));
}

fn get_opt(r: &mut Reader) -> Result<Option<i32>, Bad> {
    let (some, v) = (r.bool()?, r.i32()?);
    Ok(some.then_some(v))
}

/// Saves descriptor `d`.
pub fn put_desc(w: &mut Writer, d: &TypeDesc) {
    if let (Some(h), None) = (d.named, &d.contents)
        && predefined_desc(h).is_some()
    {
        w.u8(0);
        w.i32(h);
        return;
    }
    w.u8(1);
    w.len(d.size);
    for v in [d.lb, d.ub, d.true_lb, d.true_ub] {
        w.i64(v as i64);
    }
    w.len(d.align);
    w.bool(d.explicit_lb);
    w.bool(d.explicit_ub);
    w.len(d.runs.len());
    for run in d.runs.iter() {
        w.i64(run.off as i64);
        w.len(run.len);
        w.len(run.count);
        w.i64(run.stride as i64);
        w.len(run.elem);
    }
    w.u64(d.elems);
    put_opt(w, d.leaf);
    put_opt(w, d.named);
    w.bool(d.contents.is_some());
    if let Some(c) = &d.contents {
        w.i32(c.combiner);
        w.i32s(&c.ints);
        w.i64s(c.aints.iter().copied());
        w.i64s(c.counts.iter().copied());
        w.len(c.types.len());
        for t in &c.types {
            put_desc(w, t);
        }
    }
}

fn size(r: &mut Reader) -> Result<usize, Bad> {
    usize::try_from(r.u64()?).map_err(|e| e.to_string())
}

fn isize_of(r: &mut Reader) -> Result<isize, Bad> {
    isize::try_from(r.i64()?).map_err(|e| e.to_string())
}

/// Reads a descriptor [`put_desc`] saved.
pub fn get_desc(r: &mut Reader, depth: usize) -> Result<Arc<TypeDesc>, Bad> {
    if depth > DEPTH {
        return Err(format!("a datatype recipe deeper than {DEPTH}"));
    }
    if r.u8()? == 0 {
        let h = r.i32()?;
        return predefined_desc(h).ok_or_else(|| format!("{h:#x} is no predefined datatype"));
    }
    let sz = size(r)?;
    let (lb, ub, true_lb, true_ub) = (isize_of(r)?, isize_of(r)?, isize_of(r)?, isize_of(r)?);
    let align = size(r)?;
    let (explicit_lb, explicit_ub) = (r.bool()?, r.bool()?);
    let n = r.len(40)?;
    let runs = (0..n)
        .map(|_| Ok(Run { off: isize_of(r)?, len: size(r)?, count: size(r)?, stride: isize_of(r)?, elem: size(r)? }))
        .collect::<Result<Box<[Run]>, Bad>>()?;
    let elems = r.u64()?;
    let (leaf, named) = (get_opt(r)?, get_opt(r)?);
    let contents = if r.bool()? {
        let combiner = r.i32()?;
        let ints = r.i32s()?;
        let aints = r.i64s()?.into_iter().map(|a| a as Aint).collect();
        let counts = r.i64s()?.into_iter().map(|a| a as Count).collect();
        let n = r.len(5)?;
        let types = (0..n).map(|_| get_desc(r, depth + 1)).collect::<Result<_, Bad>>()?;
        Some(Contents { combiner, ints, aints, counts, types })
    } else {
        None
    };
    Ok(Arc::new(TypeDesc {
        size: sz,
        lb,
        ub,
        true_lb,
        true_ub,
        align,
        explicit_lb,
        explicit_ub,
        runs,
        elems,
        leaf,
        named,
        contents,
    }))
}

/// Saves a derived type's table entry (its holds are not saved: what held it, a persistent
/// request, is not restored).
pub fn put_entry(w: &mut Writer, e: &Entry) {
    put_desc(w, &e.desc);
    w.bool(e.committed);
    w.str(&e.name);
    w.bool(e.predefined);
    w.bool(e.freed);
}

/// Reads an entry [`put_entry`] saved.
pub fn get_entry(r: &mut Reader) -> Result<Entry, Bad> {
    let desc = get_desc(r, 0)?;
    let mut e = Entry::new(desc, r.bool()?);
    e.name = r.string()?;
    e.predefined = r.bool()?;
    e.freed = r.bool()?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;
    use crate::datatype::construct::{self, Form};

    #[test]
    fn a_derived_type_reads_back_the_same() {
        let int = predefined_desc(abi::INT).unwrap();
        let v = Arc::new(construct::vector(Form::Int, 3, 2, 5, false, &int).unwrap());
        let r = construct::resized(Form::Large, -4, 100, &v);
        let mut w = Writer::default();
        put_desc(&mut w, &r);
        let back = get_desc(&mut Reader::new(&w.0), 0).unwrap();
        let mut again = Writer::default();
        put_desc(&mut again, &back);
        assert_eq!(w.0, again.0, "every field saved reads back");
        assert_eq!((back.size, back.lb, back.extent(), &back.runs), (r.size, r.lb, r.extent(), &r.runs));
        let inner = &back.contents.as_ref().unwrap().types[0];
        assert_eq!(inner.contents.as_ref().unwrap().ints, vec![3, 2, 5]);
        let leaf = &inner.contents.as_ref().unwrap().types[0];
        assert!(Arc::ptr_eq(leaf, &int), "a predefined type is this process's own");
        assert!(get_desc(&mut Reader::new(&w.0[..w.0.len() - 3]), 0).is_err());
    }
}
