//! `tests/c/ft_app.c` in Rust through rsmpi (crates.io `mpi` 0.8), built by `tests/ft_app.rs`
//! against `bin/mpicc`: the same Jacobi relaxation on a Cartesian grid, the same arithmetic, so
//! the same `checksum` as the C program; the same holds (`FT_TEST_HOLD`), start files and lines.
//!
//! What rsmpi expresses: the Cartesian communicator and its shifts, the row split, the vector
//! type of a halo column, `Isend`/`Irecv` in a request scope (through `DynBuffer(Mut)::from_raw`:
//! the column halos overlap the rows sent, which safe slices cannot say), `Allreduce`, `Bcast`,
//! `Gather`, the `ANY_SOURCE` receives with their status. What it does not: `MPI_Dims_create` and
//! the checkpoint calls come from `mpi::ffi` (bindgen over our `mpi.h`); the user operation is
//! made with `MPI_Op_create` over an `extern "C"` function, because rsmpi's `UserOperation`
//! wraps a closure in a libffi trampoline allocated at run time (no address a restarted process
//! can be given back), and its `UnsafeUserOperation` cannot be rebuilt from a raw handle. Saved
//! handles come back through `FromRaw` (`CartesianCommunicator`, `SimpleCommunicator`,
//! `UserDatatype`) and a local `Operation` over the raw `MPI_Op`.

use std::ffi::{c_int, c_void};
use std::io::Write;
use std::mem::size_of;

use mpi::collective::SystemOperation;
use mpi::datatype::{DatatypeRef, DynBuffer, DynBufferMut, UserDatatype};
use mpi::ffi;
use mpi::topology::{CartesianCommunicator, Color, SimpleCommunicator};
use mpi::traits::*;

const NX: usize = 48;
const NY: usize = 48;
const EVERY: i32 = 4;
const TASKS: i64 = 3;

extern "C" {
    fn free(p: *mut c_void);
}

/// What a rank checkpoints: plain data and raw handles.
#[repr(C)]
#[derive(Clone, Copy)]
struct State {
    iter: i32,
    iters: i32,
    every: i32,
    omega: f64,
    cart: ffi::MPI_Comm,
    row: ffi::MPI_Comm,
    column: ffi::MPI_Datatype,
    minmax: ffi::MPI_Op,
    up: i32,
    down: i32,
    left: i32,
    right: i32,
    residual: f64,
    lo: f64,
    hi: f64,
    row_sum: i64,
    tasks: i64,
    u: [[f64; NY + 2]; NX + 2],
}

/// A user operation known by its raw handle (made by `MPI_Op_create`, or read back).
struct SavedOp(ffi::MPI_Op);

// SAFETY: the handle is a live operation for as long as the program uses it.
unsafe impl AsRaw for SavedOp {
    type Raw = ffi::MPI_Op;
    fn as_raw(&self) -> ffi::MPI_Op {
        self.0
    }
}

impl Operation for &SavedOp {
    fn is_commutative(&self) -> bool {
        true
    }
}

/// Elementwise over (min, max) pairs of doubles.
unsafe extern "C" fn minmax(a: *mut c_void, b: *mut c_void, len: *mut c_int, _dt: *mut ffi::MPI_Datatype) {
    // SAFETY: MPI passes two buffers of `*len` doubles.
    let (a, b) = unsafe {
        let n = *len as usize;
        (std::slice::from_raw_parts(a as *const f64, n), std::slice::from_raw_parts_mut(b as *mut f64, n))
    };
    for i in (0..a.len().saturating_sub(1)).step_by(2) {
        b[i] = b[i].min(a[i]);
        b[i + 1] = b[i + 1].max(a[i + 1]);
    }
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// This rank's earlier incarnations (start files); leaves its own.
fn incarnation(rank: i32) -> u32 {
    let Ok(dir) = std::env::var("FT_TEST_DIR") else { return 0 };
    let prefix = format!("started-{rank}-");
    let n = std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix));
    let n = n.count() as u32;
    std::fs::write(format!("{dir}/{prefix}{}", std::process::id()), "").unwrap();
    n
}

fn hold(rank: i32, inc: u32, it: i32) -> ! {
    let dir = std::env::var("FT_TEST_DIR").unwrap_or_else(|_| ".".into());
    let marker = format!("{dir}/held-{rank}-{inc}-{it}");
    std::fs::write(format!("{marker}.tmp"), std::process::id().to_string()).unwrap();
    std::fs::rename(format!("{marker}.tmp"), &marker).unwrap();
    loop {
        let mut flag = 0;
        // SAFETY: a probe on MPI_COMM_WORLD; it only serves the endpoint.
        unsafe {
            ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, 32000, ffi::RSMPI_COMM_WORLD, &mut flag, ffi::RSMPI_STATUS_IGNORE)
        };
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The handles of a state.
struct Handles {
    cart: CartesianCommunicator,
    row: SimpleCommunicator,
    column: UserDatatype,
    op: SavedOp,
}

fn make(world: &SimpleCommunicator, s: &mut State) -> Handles {
    let rank = world.rank();
    let mut p = [48.0f64, f64::from(EVERY), 0.8];
    if rank == 0 {
        for (k, var) in [(0, "FT_APP_ITERS"), (1, "FT_APP_EVERY")] {
            if let Some(n) = std::env::var(var).ok().and_then(|n| n.parse::<i32>().ok()) {
                p[k] = f64::from(n);
            }
        }
    }
    world.process_at_rank(0).broadcast_into(&mut p[..]);
    (s.iters, s.every, s.omega) = (p[0] as i32, p[1] as i32, p[2]);
    let mut dims = [0 as c_int; 2];
    // SAFETY: two dimensions to fill.
    unsafe { ffi::MPI_Dims_create(world.size(), 2, dims.as_mut_ptr()) };
    let cart = world.create_cartesian_communicator(&dims, &[false, true], false).unwrap();
    let coords = cart.rank_to_coordinates(cart.rank());
    let row = cart.split_by_color_with_key(Color::with_value(coords[0]), coords[1]).unwrap();
    let column = UserDatatype::vector(NX as i32, 1, (NY + 2) as i32, &f64::equivalent_datatype());
    // SAFETY: an integer handle, set by MPI_Op_create; `minmax` has the C signature of a user
    // function and lives as long as the program.
    let op = unsafe {
        let mut op: ffi::MPI_Op = std::mem::zeroed();
        assert_eq!(ffi::MPI_Op_create(Some(minmax), 1, &mut op), 0, "MPI_Op_create");
        op
    };
    let (up, down) = cart.shift(0, 1);
    let (left, right) = cart.shift(1, 1);
    let none = -1;
    (s.up, s.down) = (up.unwrap_or(none), down.unwrap_or(none));
    (s.left, s.right) = (left.unwrap_or(none), right.unwrap_or(none));
    for (i, r) in s.u.iter_mut().enumerate() {
        for (j, v) in r.iter_mut().enumerate() {
            *v = f64::from((rank * 7919 + i as i32 * 31 + j as i32 * 17) % 1000) / 1000.0;
        }
    }
    (s.cart, s.row, s.column, s.minmax) = (cart.as_raw(), row.as_raw(), column.as_raw(), op);
    Handles { cart, row, column, op: SavedOp(op) }
}

/// Halos: rows up and down, columns left and right (the vector type).
fn halos(s: &mut State, h: &Handles) {
    let (dbl, col) = (f64::equivalent_datatype(), DatatypeRef::from(&h.column));
    let u = s.u.as_mut_ptr() as *mut f64;
    let at = |i: usize, j: usize| u.wrapping_add(i * (NY + 2) + j);
    // SAFETY: each buffer lies in `s.u`, which outlives the scope; MPI alone touches them there
    // (received halos and sent interior cells are disjoint).
    let mut recv = unsafe {
        [
            (s.up, 1, DynBufferMut::from_raw(at(0, 1), NY as i32, dbl)),
            (s.down, 2, DynBufferMut::from_raw(at(NX + 1, 1), NY as i32, dbl)),
            (s.left, 3, DynBufferMut::from_raw(at(1, 0), 1, col)),
            (s.right, 4, DynBufferMut::from_raw(at(1, NY + 1), 1, col)),
        ]
    };
    // SAFETY: as above.
    let send = unsafe {
        [
            (s.down, 1, DynBuffer::from_raw(at(NX, 1), NY as i32, dbl)),
            (s.up, 2, DynBuffer::from_raw(at(1, 1), NY as i32, dbl)),
            (s.right, 3, DynBuffer::from_raw(at(1, NY), 1, col)),
            (s.left, 4, DynBuffer::from_raw(at(1, 1), 1, col)),
        ]
    };
    mpi::request::scope(|sc| {
        let mut reqs = Vec::new();
        for (peer, tag, buf) in recv.iter_mut().filter(|r| r.0 >= 0) {
            reqs.push(h.cart.process_at_rank(*peer).immediate_receive_into_with_tag(sc, buf, *tag));
        }
        let mut sends = Vec::new();
        for (peer, tag, buf) in send.iter().filter(|r| r.0 >= 0) {
            sends.push(h.cart.process_at_rank(*peer).immediate_send_with_tag(sc, buf, *tag));
        }
        for r in reqs {
            r.wait();
        }
        for r in sends {
            r.wait();
        }
    });
}

/// Rank 0 hands a task to every other rank and takes the answers in any order.
fn manager_worker(world: &SimpleCommunicator, s: &mut State) {
    let (rank, size) = (world.rank(), world.size());
    if rank == 0 {
        for k in 0..TASKS {
            for w in 1..size {
                let task = i64::from(s.iter) * 1000 + k * 100 + i64::from(w);
                world.process_at_rank(w).send_with_tag(&task, 10 + k as i32);
            }
        }
        let mut answer = vec![0i64; size as usize];
        for _ in 0..TASKS * i64::from(size - 1) {
            let (v, st) = world.any_process().receive::<i64>();
            let (src, tag) = (st.source_rank(), st.tag());
            assert!(src > 0 && src < size && (20..20 + TASKS as i32).contains(&tag), "answer from {src} tag {tag}");
            let want = (i64::from(s.iter) * 1000 + i64::from(tag - 20) * 100 + i64::from(src)) * 3 + i64::from(src);
            assert_eq!(v, want, "answer from {src}");
            answer[src as usize] += v;
        }
        for a in &answer[1..] {
            s.tasks = (s.tasks * 31 + a) % 1_000_000_007;
        }
    } else {
        for k in 0..TASKS {
            let (task, _) = world.process_at_rank(0).receive_with_tag::<i64>(10 + k as i32);
            world.process_at_rank(0).send_with_tag(&(task * 3 + i64::from(rank)), 20 + k as i32);
        }
    }
}

fn step(world: &SimpleCommunicator, s: &mut State, h: &Handles, unew: &mut [[f64; NY + 2]; NX + 2]) {
    let mut omega = if world.rank() == 0 { s.omega * (1.0 + 0.1 * f64::from(u8::from(s.residual > 1.0))) } else { 0.0 };
    world.process_at_rank(0).broadcast_into(&mut omega);
    halos(s, h);
    let (mut local, mut mm) = (0.0f64, [1e300f64, -1e300]);
    for i in 1..=NX {
        for j in 1..=NY {
            let u = &s.u;
            let v = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]);
            unew[i][j] = u[i][j] + omega * (v - u[i][j]);
            let d = unew[i][j] - u[i][j];
            local += d * d;
            mm[0] = if unew[i][j] < mm[0] { unew[i][j] } else { mm[0] };
            mm[1] = if unew[i][j] > mm[1] { unew[i][j] } else { mm[1] };
        }
    }
    for (i, row) in unew.iter().enumerate().take(NX + 1).skip(1) {
        s.u[i][1..=NY].copy_from_slice(&row[1..=NY]);
    }
    world.all_reduce_into(&local, &mut s.residual, SystemOperation::sum());
    let mut all = [0.0f64; 2];
    h.cart.all_reduce_into(&mm[..], &mut all[..], &h.op);
    assert!(all[0] <= mm[0] && all[1] >= mm[1], "min/max {all:?} beside mine {mm:?}");
    s.lo += all[0];
    s.hi += all[1];
    let cells = (s.u[1][1] * 1e6) as i64;
    let mut row = 0i64;
    h.row.all_reduce_into(&cells, &mut row, SystemOperation::sum());
    s.row_sum = (s.row_sum * 31 + row) % 1_000_000_007;
    manager_worker(world, s);
}

/// `%.9e` as C prints it (a sign and at least two digits in the exponent).
fn c_e9(x: f64) -> String {
    let r = format!("{x:.9e}");
    let (m, e) = r.split_once('e').unwrap();
    let e: i32 = e.parse().unwrap();
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let inc = incarnation(rank);
    // SAFETY: plain data and handles; every field is valid zeroed until made or restored.
    let mut s: Box<State> = Box::new(unsafe { std::mem::zeroed() });
    let (mut buf, mut len, mut restored) = (std::ptr::null_mut::<c_void>(), 0usize, 0 as c_int);
    // SAFETY: out-parameters of the right types.
    let rc = unsafe { ffi::MPIX_Checkpoint_restore(&mut buf, &mut len, &mut restored) };
    assert_eq!(rc, 0, "MPIX_Checkpoint_restore");
    let h = if restored != 0 {
        assert_eq!(len, size_of::<State>(), "restored bytes");
        // SAFETY: `len` bytes at `buf`, a `State` this program saved; `buf` is the library's
        // malloc'd copy, ours to free.
        unsafe {
            std::ptr::copy_nonoverlapping(buf as *const State, &mut *s, 1);
            free(buf);
        }
        // One write: `eprintln!` writes a line in pieces, which other ranks' lines would split.
        let line = format!("ft_app: rank {rank} incarnation {inc} resumes at iteration {}\n", s.iter);
        std::io::stderr().write_all(line.as_bytes()).unwrap();
        // SAFETY: the handles the checkpoint held, live again in this incarnation.
        unsafe {
            Handles {
                cart: CartesianCommunicator::from_raw(s.cart),
                row: SimpleCommunicator::from_raw(s.row),
                column: UserDatatype::from_raw(s.column),
                op: SavedOp(s.minmax),
            }
        }
    } else {
        make(&world, &mut s)
    };
    let holds = std::env::var("FT_TEST_HOLD").unwrap_or_default();
    let mut unew = Box::new([[0.0f64; NY + 2]; NX + 2]);
    while s.iter < s.iters {
        if holds.split(',').any(|x| x == format!("{rank}@{inc}:{}", s.iter)) {
            hold(rank, inc, s.iter);
        }
        step(&world, &mut s, &h, &mut unew);
        s.iter += 1;
        if s.iter % s.every == 0 && s.iter < s.iters {
            // SAFETY: the state's bytes.
            let rc = unsafe { ffi::MPIX_Checkpoint(&*s as *const State as *const c_void, size_of::<State>()) };
            assert_eq!(rc, 0, "MPIX_Checkpoint");
        }
    }

    // SAFETY: the grid's bytes.
    let grid = unsafe { std::slice::from_raw_parts(s.u.as_ptr() as *const u8, size_of::<[[f64; NY + 2]; NX + 2]>()) };
    let mut h0 = fnv(0xcbf2_9ce4_8422_2325, grid);
    for b in [s.lo.to_ne_bytes(), s.hi.to_ne_bytes(), s.row_sum.to_ne_bytes(), s.tasks.to_ne_bytes()] {
        h0 = fnv(h0, &b);
    }
    let h1 = fnv(h0, &s.residual.to_ne_bytes());
    let h0 = fnv(h0, c_e9(s.residual).as_bytes());
    let mine = [h0, h1];
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut all = vec![0u64; 2 * size as usize];
        root.gather_into_root(&mine[..], &mut all[..]);
        let mut sum = [0xcbf2_9ce4_8422_2325u64; 2];
        for r in all.chunks(2) {
            sum[0] = fnv(sum[0], &r[0].to_ne_bytes());
            sum[1] = fnv(sum[1], &r[1].to_ne_bytes());
        }
        println!("checksum {:016x} exact {:016x}", sum[0], sum[1]);
    } else {
        root.gather_into(&mine[..]);
    }
    let Handles { cart, row, column, op } = h;
    drop((row, cart, column));
    let mut raw = op.0;
    // SAFETY: the operation made by `make` (or read back), freed once.
    unsafe { ffi::MPI_Op_free(&mut raw) };
    println!("OK ft_app {rank}");
}
