//! A token goes around the ring of ranks `laps` times, growing by one byte per hop; then every
//! rank sends its rank number to rank 0, which receives them in any order.
//!
//! ```sh
//! cargo build --release --example ring
//! target/release/nemesis-run -n 4 -- target/release/examples/ring 3
//! mpiexec.hydra -n 4 target/release/examples/ring 3
//! ```

use nemesis::{ANY_SOURCE, ANY_TAG, Endpoint, WORLD};

fn main() -> Result<(), nemesis::Error> {
    let laps: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    nemesis::log::init();
    let mut ep = Endpoint::init()?;
    let (rank, size) = (ep.rank(), ep.size());
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut token = Vec::new();
    let mut buf = vec![0u8; (laps * size + 1) as usize];
    for lap in 0..laps {
        if rank == 0 {
            token.push(0);
            ep.send(&token, next, 1, WORLD)?;
            let st = ep.recv(&mut buf, prev as i32, 1, WORLD)?;
            token = buf[..st.len].to_vec();
            println!("lap {lap}: the token came back with {} bytes", token.len());
        } else {
            let st = ep.recv(&mut buf, prev as i32, 1, WORLD)?;
            token = buf[..st.len].to_vec();
            token.push(rank as u8);
            ep.send(&token, next, 1, WORLD)?;
        }
    }
    if rank == 0 {
        let mut seen = vec![false; size as usize];
        seen[0] = true;
        for _ in 1..size {
            let mut r = [0u8; 4];
            let st = ep.recv(&mut r, ANY_SOURCE, ANY_TAG, WORLD)?;
            seen[u32::from_le_bytes(r) as usize] = true;
            assert_eq!(st.source, u32::from_le_bytes(r));
        }
        println!("rank 0 heard from all {size} ranks: {}", seen.iter().all(|&s| s));
    } else {
        ep.send(&rank.to_le_bytes(), 0, 2, WORLD)?;
    }
    ep.finalize()
}
