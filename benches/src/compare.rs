//! `nemesis-bench compare`, `latency`, `bw` and `bibw`: the suite engine ([`crate::suite`]) over
//! a set of systems, then the report ([`crate::report`]) and, with `--out`, CSV files and plots.

use crate::error::{Error, Result};
use crate::suite::{self, Plan};
use crate::system::{self, Context, System};
use crate::workload::Workload;

/// `compare`'s options.
#[derive(Clone, Debug, clap::Args)]
pub struct CompareOpts {
    #[command(flatten)]
    pub suite: suite::SuiteOpts,
    /// The systems to run, comma-separated [default: nemesis-shm, nemesis-c-abi, nemesis-tcp,
    /// nemesis-ofi, unix-socket, pipe, iceoryx2, openmpi, mpich; also known: fi-pingpong,
    /// openmpi-ofi, the provider's anchors].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// The libfabric provider of nemesis-ofi, fi-pingpong and openmpi-ofi (e.g. `tcp;ofi_rxm`,
    /// `shm`, `udp;ofi_rxd`) [default: NEMESIS_OFI_PROVIDER, else tcp;ofi_rxm].
    #[arg(long)]
    pub ofi_provider: Option<String>,
}

/// The options of `latency`, `bw` and `bibw`.
#[derive(Clone, Debug, clap::Args)]
pub struct EndpointOpts {
    #[command(flatten)]
    pub suite: suite::SuiteOpts,
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
    let plan = Plan::new(&o.suite, vec![Workload::Latency, Workload::Bandwidth])?;
    let (found, skipped) = system::discover(&ctx, &names)?;
    finish(&ctx, found, skipped, &plan, &o.suite, "compare")
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
    o: &suite::SuiteOpts,
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
