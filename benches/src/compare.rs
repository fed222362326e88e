//! `nemesis-bench compare`, `latency`, `bw` and `bibw`: the suite engine ([`crate::suite`]) over
//! a set of systems, then the report ([`crate::report`]) and, with `--out`, CSV files and plots.

use crate::error::{Error, Result};
use crate::plan::{Plan, SuiteOpts};
use crate::suite;
use crate::system::{self, Context, System};
use crate::workload::Workload;

/// `compare`'s options.
#[derive(Clone, Debug, clap::Args)]
pub struct CompareOpts {
    #[command(flatten)]
    pub suite: SuiteOpts,
    /// The systems to run, comma-separated [default: nemesis-shm, nemesis-c-abi, nemesis-tcp,
    /// nemesis-ofi, unix-socket, pipe, iceoryx2, openmpi, mpich; also known: fi-pingpong,
    /// openmpi-ofi, the provider's anchors].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// The libfabric provider of nemesis-ofi, fi-pingpong and openmpi-ofi (e.g. `tcp;ofi_rxm`,
    /// `shm`, `udp;ofi_rxd`) [default: NEMESIS_OFI_PROVIDER, else tcp;ofi_rxm].
    #[arg(long)]
    pub ofi_provider: Option<String>,
    /// What to measure, comma-separated: lat, bw, bibw, coll (the collectives of the MPI systems
    /// among --systems, up to --max-size if given, else 64K, 4K with --quick) [default:
    /// lat,bw,coll].
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    #[command(flatten)]
    pub coll: crate::coll::CollArgs,
}

/// The word of the collectives in `--workloads`.
const COLL: &str = "coll";

/// Parses `--workloads`: the point-to-point workloads, and whether the collectives run.
fn workloads(list: &[String]) -> Result<(Vec<Workload>, bool)> {
    if list.is_empty() {
        return Ok((vec![Workload::Latency, Workload::Bandwidth], true));
    }
    let (mut p2p, mut coll) = (Vec::new(), false);
    for w in list {
        match Workload::from_key(w) {
            Some(w) if !p2p.contains(&w) => p2p.push(w),
            Some(_) => {}
            None if w == COLL => coll = true,
            None => {
                return Err(Error::Usage(format!("--workloads: unknown `{w}`: the workloads are lat, bw, bibw, coll")));
            }
        }
    }
    p2p.sort();
    Ok((p2p, coll))
}

/// The options of `latency`, `bw` and `bibw`.
#[derive(Clone, Debug, clap::Args)]
pub struct EndpointOpts {
    #[command(flatten)]
    pub suite: SuiteOpts,
    /// A configuration of the Endpoint to measure, `name:VAR=value,VAR=value` (repeatable), e.g.
    /// `ring:NEMESIS_LMT=shm` [default: the defaults, named nemesis-shm].
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// Other systems to measure alongside, by compare's names (e.g. `openmpi,iceoryx2`).
    #[arg(long, value_delimiter = ',')]
    pub with: Vec<String>,
}

/// Parses `name:VAR=value,VAR=value`.
pub fn parse_variant(v: &str) -> Result<System> {
    let bad = || Error::Usage(format!("--variant {v}: expected name:VAR=value,VAR=value"));
    let (name, vars) = v.split_once(':').unwrap_or((v, ""));
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(bad());
    }
    let mut env = Vec::new();
    for kv in vars.split(',').filter(|s| !s.is_empty()) {
        let (k, val) = kv.split_once('=').ok_or_else(bad)?;
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(bad());
        }
        env.push((k.to_owned(), val.to_owned()));
    }
    Ok(System::endpoint(name, env))
}

/// `compare`.
pub fn compare(o: &CompareOpts) -> Result<()> {
    let mut ctx = Context::new()?;
    if let Some(p) = &o.ofi_provider {
        ctx.ofi_provider = p.clone();
    }
    let names: Vec<String> =
        if o.systems.is_empty() { system::DEFAULT.iter().map(|s| s.to_string()).collect() } else { o.systems.clone() };
    let (p2p, coll) = workloads(&o.workloads)?;
    let plan = Plan::new(&o.suite, p2p.clone())?;
    // The collectives run on the MPI systems asked for; every option is checked before anything
    // runs.
    let coll_names: Vec<String> = names.iter().filter(|n| system::MPI_NAMES.contains(&n.as_str())).cloned().collect();
    let coll_plan = if coll {
        if coll_names.is_empty() && !o.workloads.is_empty() {
            return Err(Error::Usage(format!(
                "--workloads coll: no MPI system among --systems (the MPI systems are {})",
                system::MPI_NAMES.join(", ")
            )));
        }
        let quick_max = if o.suite.quick { crate::coll::QUICK_MAX } else { crate::coll::DEFAULT_MAX };
        let max = o.suite.sizes.iter().copied().max().or(o.suite.max_size).unwrap_or(quick_max);
        let timeout = std::time::Duration::from_secs(o.suite.timeout);
        Some(crate::coll::Plan::new(&o.coll, plan.rounds, max, timeout)?)
    } else {
        None
    };
    if !p2p.is_empty() {
        let (found, skipped) = system::discover(&ctx, &names)?;
        finish(&ctx, found, skipped, &plan, &o.suite, "compare")?;
    }
    match coll_plan {
        Some(_) if coll_names.is_empty() => {
            println!(
                "
(no collectives: no MPI system among --systems)"
            );
            Ok(())
        }
        Some(cp) => {
            println!();
            let (found, skipped) = system::discover_mpi(&ctx, &coll_names, system::MPI_COLL)?;
            crate::coll::finish(&ctx, found, skipped, &cp, o.suite.out.as_deref(), "compare", "compare-coll")
        }
        None => Ok(()),
    }
}

/// `latency`, `bw` or `bibw`: the Endpoint (and its variants), with `--with` systems alongside.
pub fn endpoint(w: Workload, o: &EndpointOpts) -> Result<()> {
    let ctx = Context::new()?;
    let plan = Plan::new(&o.suite, vec![w])?;
    let mut systems = if o.variants.is_empty() {
        vec![System::endpoint("nemesis-shm", Vec::new())]
    } else {
        o.variants.iter().map(|v| parse_variant(v)).collect::<Result<Vec<_>>>()?
    };
    let (found, skipped) = system::discover(&ctx, &o.with)?;
    for s in found {
        if !systems.iter().any(|x| x.name == s.name) {
            systems.push(s);
        }
    }
    let mut skipped: Vec<_> = skipped.into_iter().filter(|s| !systems.iter().any(|x| x.name == s.name)).collect();
    let (systems, unable): (Vec<System>, Vec<System>) = systems.into_iter().partition(|s| s.supports(w));
    skipped.extend(
        unable.into_iter().map(|s| system::Skipped { name: s.name, reason: format!("no {} workload", w.key()) }),
    );
    finish(&ctx, systems, skipped, &plan, &o.suite, w.file_stem())
}

fn finish(
    ctx: &Context,
    systems: Vec<System>,
    skipped: Vec<system::Skipped>,
    plan: &Plan,
    o: &SuiteOpts,
    command: &str,
) -> Result<()> {
    let outcome = suite::run(ctx, systems, skipped, plan)?;
    print!("{}", crate::report::text(&outcome, command));
    if let Some(dir) = &o.out {
        let mut files = crate::report::write_csv(&outcome, dir, command)?;
        files.extend(crate::plot::write(&outcome, dir, command, &format!("nemesis-bench {command}"))?);
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_or_are_refused() {
        let s = parse_variant("ring:NEMESIS_LMT=shm,NEMESIS_EAGER_MAX=1024").unwrap();
        assert_eq!(s.name, "ring");
        assert!(s.detail.contains("NEMESIS_LMT=shm") && s.detail.contains("NEMESIS_EAGER_MAX=1024"));
        assert_eq!(parse_variant("plain").unwrap().name, "plain");
        for bad in [":X=1", "a:novalue", "a:=1", "has space:X=1"] {
            assert!(matches!(parse_variant(bad), Err(Error::Usage(_))), "{bad}");
        }
    }
}
