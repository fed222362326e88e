//! Gather, scatter and allgather algorithms over a [`Team`]: `block` bytes per member.

use super::{Ops, Team, split_ranges};
use crate::error::Res;

// ---------------------------------------------------------------------------------------------
// Gather and scatter: `block` bytes per member; `all` is the root's buffer of `size × block`
// bytes in team order (the root's own block included).

/// Blocks up to this size are gathered flat by blocking receives in turn rather than posted
/// receives: a blocking receive reads its source's fastbox straight into the buffer and makes no
/// request, and a block that arrives while the root waits for another is copied out once, which
/// costs little at this size.
pub const GATHER_IN_TURN_MAX: usize = 4096;

/// Flat gather: the root posts a receive per member straight into its place (small blocks:
/// receives them in turn, [`GATHER_IN_TURN_MAX`]).
pub fn gather_flat(ops: &mut Ops, t: Team, root: usize, mine: &[u8], all: &mut [u8], block: usize) -> Res<()> {
    if t.me != root {
        return ops.send(t.at(root), mine);
    }
    if block <= GATHER_IN_TURN_MAX {
        let n = t.size();
        for rel in 1..n {
            let i = (root + rel) % n;
            ops.recv(t.at(i), &mut all[i * block..(i + 1) * block])?;
        }
        return Ok(());
    }
    let base = all.as_mut_ptr();
    ops.settled(|ops| {
        let mut posted = Vec::new();
        for i in (0..t.size()).filter(|&i| i != root) {
            // SAFETY: block i of `all`, borrowed for this call; `settled` waits for it on every
            // path.
            posted.extend(unsafe { ops.post(t.at(i), base.add(i * block), block) }?);
        }
        ops.wait(&posted)
    })
}

/// Binomial gather: each rank collects its subtree's blocks (contiguous in relative order) and
/// sends them to its parent; the root rotates them into team order.
pub fn gather_binomial(ops: &mut Ops, t: Team, root: usize, mine: &[u8], all: &mut [u8], block: usize) -> Res<()> {
    let (n, rel) = (t.size(), t.rel(root));
    let span = if rel == 0 { n } else { (rel & rel.wrapping_neg()).min(n - rel) };
    let mut tmp = vec![0u8; span * block];
    tmp[..block].copy_from_slice(mine);
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            return ops.send(t.abs(root, rel - mask), &tmp);
        }
        if rel + mask < n {
            let cnt = mask.min(n - rel - mask);
            ops.recv(t.abs(root, rel + mask), &mut tmp[mask * block..(mask + cnt) * block])?;
        }
        mask <<= 1;
    }
    for j in 0..n {
        let i = (j + root) % n;
        all[i * block..(i + 1) * block].copy_from_slice(&tmp[j * block..(j + 1) * block]);
    }
    Ok(())
}

/// Flat scatter: the root sends each member its block.
pub fn scatter_flat(ops: &mut Ops, t: Team, root: usize, all: &[u8], mine: &mut [u8], block: usize) -> Res<()> {
    if t.me != root {
        return ops.recv(t.at(root), mine);
    }
    for i in (0..t.size()).filter(|&i| i != root) {
        ops.send(t.at(i), &all[i * block..(i + 1) * block])?;
    }
    mine.copy_from_slice(&all[root * block..(root + 1) * block]);
    Ok(())
}

/// Binomial scatter: the root sends each child its subtree's blocks (contiguous in relative
/// order), which forwards the parts of its own children.
pub fn scatter_binomial(ops: &mut Ops, t: Team, root: usize, all: &[u8], mine: &mut [u8], block: usize) -> Res<()> {
    let (n, rel) = (t.size(), t.rel(root));
    let (tmp, mut mask) = if rel == 0 {
        let mut tmp = vec![0u8; n * block];
        for j in 0..n {
            let i = (j + root) % n;
            tmp[j * block..(j + 1) * block].copy_from_slice(&all[i * block..(i + 1) * block]);
        }
        (tmp, n.next_power_of_two() >> 1)
    } else {
        let low = rel & rel.wrapping_neg();
        let span = low.min(n - rel);
        let mut tmp = vec![0u8; span * block];
        ops.recv(t.abs(root, rel - low), &mut tmp)?;
        (tmp, low >> 1)
    };
    while mask > 0 {
        if rel + mask < n {
            let cnt = mask.min(n - rel - mask);
            ops.send(t.abs(root, rel + mask), &tmp[mask * block..(mask + cnt) * block])?;
        }
        mask >>= 1;
    }
    mine.copy_from_slice(&tmp[..block]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Allgather: `all` holds `size × block` bytes in team order, this rank's block already in place.

/// Ring: `size − 1` steps, each passing on the block received in the previous one.
pub fn allgather_ring(ops: &mut Ops, t: Team, all: &mut [u8], block: usize) -> Res<()> {
    let n = t.size();
    let (right, left) = (t.at(t.me + 1), t.at(t.me + n - 1));
    for s in 0..n.saturating_sub(1) {
        let send_b = (t.me + n - s) % n;
        let recv_b = (t.me + n - s - 1) % n;
        let (data, buf) = split_ranges(all, send_b * block..(send_b + 1) * block, recv_b * block..(recv_b + 1) * block);
        ops.exchange(right, data, left, buf)?;
    }
    Ok(())
}

/// Bruck: at step `d` (1, 2, 4…) send the blocks gathered so far to `me − d`, receive as many
/// from `me + d`; then rotate into team order.
pub fn allgather_bruck(ops: &mut Ops, t: Team, all: &mut [u8], block: usize) -> Res<()> {
    let n = t.size();
    let mut tmp = vec![0u8; n * block];
    tmp[..block].copy_from_slice(&all[t.me * block..(t.me + 1) * block]);
    let mut d = 1;
    while d < n {
        let cnt = d.min(n - d);
        let (data, buf) = split_ranges(&mut tmp, 0..cnt * block, d * block..(d + cnt) * block);
        ops.exchange(t.at(t.me + n - d), data, t.at(t.me + d), buf)?;
        d *= 2;
    }
    for j in 0..n {
        let i = (t.me + j) % n;
        all[i * block..(i + 1) * block].copy_from_slice(&tmp[j * block..(j + 1) * block]);
    }
    Ok(())
}
