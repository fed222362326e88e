//! The collectives' configuration (`NEMESIS_COLL_*`): the model parameters of each level and
//! the algorithms forced for each operation.

use super::model::{Allgather, Allreduce, Barrier, Bcast, Gather, Params, Reduce};

/// Algorithms forced by `NEMESIS_COLL_ALG` (`None`: the model chooses).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Force {
    /// `Chain(0)`: a chain whose segment the model (or `NEMESIS_COLL_SEGMENT`) chooses.
    pub bcast: Option<Bcast>,
    pub reduce: Option<Reduce>,
    pub allreduce: Option<Allreduce>,
    pub gather: Option<Gather>,
    pub scatter: Option<Gather>,
    pub allgather: Option<Allgather>,
    pub barrier: Option<Barrier>,
}

/// The collectives' configuration: model parameters per level and overrides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// Between ranks of a node (`NEMESIS_COLL_SHM`).
    pub shm: Params,
    /// Between node leaders (`NEMESIS_COLL_NET`).
    pub net: Params,
    /// `NEMESIS_COLL_ALG`.
    pub force: Force,
    /// `NEMESIS_COLL_SEGMENT`: the chain broadcast's segment in bytes.
    pub segment: Option<usize>,
    /// `NEMESIS_COLL_NODES`: pretend the job spans this many nodes (testing).
    pub fake_nodes: Option<u32>,
    /// `NEMESIS_COLL_AREA`: small collectives of a communicator on one node go through a shared
    /// area of the segment ([`area`]).
    pub area: bool,
}

impl Tuning {
    pub const DEFAULT: Tuning = Tuning {
        shm: Params::SHM,
        net: Params::NET,
        force: Force {
            bcast: None,
            reduce: None,
            allreduce: None,
            gather: None,
            scatter: None,
            allgather: None,
            barrier: None,
        },
        segment: None,
        fake_nodes: None,
        area: true,
    };

    /// The defaults with the `NEMESIS_COLL_*` overrides from `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Tuning, String> {
        let mut t = Tuning::DEFAULT;
        if let Some(v) = var("NEMESIS_COLL_SHM") {
            t.shm = t.shm.parse_over(&v).map_err(|e| format!("NEMESIS_COLL_SHM: {e}"))?;
        }
        if let Some(v) = var("NEMESIS_COLL_NET") {
            t.net = t.net.parse_over(&v).map_err(|e| format!("NEMESIS_COLL_NET: {e}"))?;
        }
        if let Some(v) = var("NEMESIS_COLL_SEGMENT") {
            let s = nemesis::config::parse_bytes(&v).filter(|&s| s > 0);
            t.segment = Some(s.ok_or_else(|| format!("NEMESIS_COLL_SEGMENT={v}: not a positive size"))?);
        }
        if let Some(v) = var("NEMESIS_COLL_NODES") {
            let k = v.trim().parse::<u32>().ok().filter(|&k| k > 0);
            t.fake_nodes = Some(k.ok_or_else(|| format!("NEMESIS_COLL_NODES={v}: not a positive number"))?);
        }
        if let Some(v) = var("NEMESIS_COLL_AREA") {
            t.area = match v.trim() {
                "1" | "on" => true,
                "0" | "off" => false,
                _ => return Err(format!("NEMESIS_COLL_AREA={v}: expected 1 or 0 (on or off)")),
            };
        }
        if let Some(v) = var("NEMESIS_COLL_ALG") {
            t.force = parse_force(&v).map_err(|e| format!("NEMESIS_COLL_ALG: {e}"))?;
        }
        Ok(t)
    }
}

/// Parses `bcast=chain,reduce=binomial,...`.
fn parse_force(s: &str) -> Result<Force, String> {
    let mut f = Force::default();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (op, alg) = item.split_once('=').ok_or_else(|| format!("`{item}`: expected operation=algorithm"))?;
        let bad = || format!("`{item}`: unknown algorithm");
        match op.trim() {
            "bcast" => {
                f.bcast = Some(match alg {
                    "flat" => Bcast::Flat,
                    "binomial" => Bcast::Binomial,
                    "chain" => Bcast::Chain(0),
                    _ => return Err(bad()),
                })
            }
            "reduce" => {
                f.reduce = Some(match alg {
                    "flat" => Reduce::Flat,
                    "binomial" => Reduce::Binomial,
                    "rabenseifner" => Reduce::Rabenseifner,
                    _ => return Err(bad()),
                })
            }
            "allreduce" => {
                f.allreduce = Some(match alg {
                    "recursive-doubling" => Allreduce::RecursiveDoubling,
                    "rabenseifner" => Allreduce::Rabenseifner,
                    "reduce-bcast" => Allreduce::ReduceBcast,
                    _ => return Err(bad()),
                })
            }
            "gather" | "scatter" => {
                let g = match alg {
                    "flat" => Gather::Flat,
                    "binomial" => Gather::Binomial,
                    _ => return Err(bad()),
                };
                if op.trim() == "gather" {
                    f.gather = Some(g);
                } else {
                    f.scatter = Some(g);
                }
            }
            "allgather" => {
                f.allgather = Some(match alg {
                    "ring" => Allgather::Ring,
                    "bruck" => Allgather::Bruck,
                    "gather-bcast" => Allgather::GatherBcast,
                    _ => return Err(bad()),
                })
            }
            "barrier" => {
                f.barrier = Some(match alg {
                    "dissemination" => Barrier::Dissemination,
                    "fan" => Barrier::FanInOut,
                    _ => return Err(bad()),
                })
            }
            other => return Err(format!("unknown operation `{other}`")),
        }
    }
    Ok(f)
}
