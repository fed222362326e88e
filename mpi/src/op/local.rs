//! `MPI_Reduce_local_c` (MPI-4.1 §6.9.7): the large-count form of `MPI_Reduce_local`, run as
//! `int`-count pieces of `crate::coll::reduce_local` (the elements of a local reduction are
//! independent, so cutting the buffers changes nothing).

use std::ffi::{c_int, c_void};

use crate::abi::{self, Count, Datatype};
use crate::error::{Fail, Res, Why};
use crate::state::Access;

/// `MPI_Reduce_local_c`: in pieces of at most `INT_MAX` elements.
///
/// # Safety
/// MPI's contract on the buffers.
pub unsafe fn reduce_local_c(
    acc: &mut Access,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: Count,
    dt: Datatype,
    op: abi::Op,
) -> Res<()> {
    if count < 0 {
        return Err(Fail::new(abi::ERR_COUNT, None, Why::Arg("negative count")));
    }
    let ext = crate::datatype::calls::query(acc, dt)?.extent();
    let mut done: Count = 0;
    loop {
        let n = (count - done).min(Count::from(c_int::MAX));
        let off = (done as isize).wrapping_mul(ext);
        // SAFETY: MPI's contract: the pieces are the buffers' elements `done..done + n`.
        unsafe {
            crate::coll::reduce_local(
                acc,
                inbuf.wrapping_byte_offset(off),
                inoutbuf.wrapping_byte_offset(off),
                n as c_int,
                dt,
                op,
            )?
        };
        done += n;
        if done >= count {
            return Ok(());
        }
    }
}
