//! The README's example: every rank sends a number to rank 0.
//!
//! ```sh
//! cargo build --release -p nemesis --example hello --bin nemesis-run
//! target/release/nemesis-run -n 3 -- target/release/examples/hello
//! ```

use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, WORLD};

fn main() -> Result<(), nemesis::Error> {
    nemesis::log::init(); // nemesis's warnings on stderr (more with NEMESIS_LOG=debug); optional
    let mut ep = Endpoint::init()?; // PMI-1, PMI-2 or PMIx bootstrap, or a singleton
    let (rank, size) = (ep.rank(), ep.size());
    if rank == 0 {
        let mut buf = [0u8; 4];
        for _ in 1..size {
            let st = ep.recv(&mut buf, ANY_SOURCE, ANY_TAG, WORLD)?;
            println!("rank {} says {}", st.source, u32::from_le_bytes(buf));
        }
    } else {
        ep.send(&(rank * 10).to_le_bytes(), 0, 7, WORLD)?;
    }
    ep.finalize() // completes sends, synchronises, leaves the segment
}
