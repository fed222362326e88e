use super::report::{COLUMNS, target, text, write_csv};
use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: Opts,
}

fn opts(args: &[&str]) -> Opts {
    Cli::try_parse_from(std::iter::once("rma").chain(args.iter().copied())).unwrap().opts
}

#[test]
fn the_default_plan_is_the_issues_targets() {
    let p = Plan::new(&opts(&[])).unwrap();
    // put, get, acc, fop, cas latency; put, get bandwidth; put over TCP.
    let groups: Vec<(Transport, Mode, &str)> = p.groups.iter().map(|g| (g.transport, g.mode, g.op)).collect();
    assert_eq!(groups.len(), 8, "{groups:?}");
    assert_eq!(groups[0], (Transport::Node, Mode::Lat, "put"));
    assert_eq!(groups[5], (Transport::Node, Mode::Bw, "put"));
    assert_eq!(groups[7], (Transport::Tcp, Mode::Lat, "put"));
    assert_eq!(p.groups[0].args, ["lat", "put", "allocate,shared,create,create-allocmem", "flush", "8"]);
    assert_eq!(p.groups[5].args, ["bw", "put", "allocate,shared,create,create-allocmem", "flush", "65536,1048576"]);
    // A shared window spans one node: not over TCP.
    assert_eq!(p.groups[7].args, ["lat", "put", "allocate,create,create-allocmem", "flush", "8"]);
    assert_eq!(p.rows.len(), 5 * 4 + 2 * 4 * 2 + 3);
    assert_eq!(p.bw_sizes(), [65536, 1 << 20]);
    assert_eq!(p.rounds, 5);
    let q = Plan::new(&opts(&["--quick"])).unwrap();
    assert_eq!(q.rounds, 3);
    assert_eq!(q.groups[0].args.last().map(String::as_str), Some("2000"));
}

#[test]
fn sizes_follow_the_operation() {
    assert_eq!(op_sizes("fop", &[1, 64]), [8]);
    assert_eq!(op_sizes("acc", &[7, 8, 12, 64]), [0, 8, 64]);
    assert_eq!(op_sizes("put", &[0, 8]), [0, 8]);
    let p = Plan::new(&opts(&["--ops", "cas,put", "--lat-sizes", "0,4K", "--bw-ops", "", "--tcp-ops", ""])).unwrap();
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.groups[0].args[4], "8");
    assert_eq!(p.groups[1].args[4], "0,4096");
    assert_eq!(p.rows.len(), 4 + 2 * 4);
}

#[test]
fn bad_plans_are_usage_errors() {
    for args in [
        &["--ops", "swap"][..],
        &["--flavors", "mmap"],
        &["--syncs", "barrier"],
        &["--bw-ops", "fop"],
        &["--flavors", "shared", "--tcp-ops", "put"],
        &["--ops", "", "--bw-ops", "", "--tcp-ops", ""],
        &["--rounds", "0"],
        &["--lat-sizes", "2G"],
    ] {
        assert!(matches!(Plan::new(&opts(args)), Err(Error::Usage(_))), "{args:?} accepted");
    }
}

#[test]
fn osu_rma_lines_parse() {
    let text = "Warning: something\nrma lat put allocate flush 8 0.0330\nrma bw get create fence 65536 9876.5\n\
                rma skip cas shared pscw MPI_ERR_WIN: invalid window\n";
    let lines = parse(text).unwrap();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        Line::Figure { mode: Mode::Lat, op: "put", flavor: "allocate", sync: "flush", bytes: 8, value: 0.033 }
    );
    assert!(matches!(&lines[1], Line::Figure { mode: Mode::Bw, sync: "fence", bytes: 65536, .. }));
    assert_eq!(
        lines[2],
        Line::Skip { op: "cas", flavor: "shared", sync: "pscw", reason: "MPI_ERR_WIN: invalid window".into() }
    );
    for bad in [
        "rma lat put allocate flush 8",
        "rma lat swap allocate flush 8 1.0",
        "rma lat put mmap flush 8 1.0",
        "rma lat put allocate flush -8 1.0",
        "rma lat put allocate flush 8 nan",
        "rma lat put allocate flush 8 0",
        "rma fast put allocate flush 8 1.0",
        "rma skip put allocate flush",
    ] {
        match parse(bad) {
            Err(Error::Run(e)) => assert!(e.contains(bad), "{bad}: {e}"),
            other => panic!("{bad} accepted: {other:?}"),
        }
    }
}

fn member(name: &str, family: Family, transport: Transport) -> Member {
    Member { name: name.into(), family, transport, detail: "d".into() }
}

fn outcome() -> Outcome {
    let row = |transport, mode, op, bytes| Row { transport, mode, op, flavor: "allocate", sync: "flush", bytes };
    Outcome {
        members: vec![
            member("nemesis-c-abi", Family::Nemesis, Transport::Node),
            member("openmpi", Family::Peer, Transport::Node),
            member("mpich", Family::Peer, Transport::Node),
            member("nemesis-c-abi-tcp", Family::Nemesis, Transport::Tcp),
            member("openmpi-tcp", Family::Peer, Transport::Tcp),
        ],
        skipped: vec![Skipped { name: "mpich-tcp".into(), reason: "not compared".into() }],
        rows: vec![
            row(Transport::Node, Mode::Lat, "put", 8),
            row(Transport::Node, Mode::Bw, "get", 65536),
            row(Transport::Tcp, Mode::Lat, "put", 8),
        ],
        // [member][row][round]
        values: vec![
            vec![vec![0.25, 0.5], vec![10000.0, 8000.0], vec![f64::NAN; 2]],
            vec![vec![0.25, 0.25], vec![5000.0, 8000.0], vec![f64::NAN; 2]],
            vec![vec![2.0, 4.0], vec![2500.0, 4000.0], vec![f64::NAN; 2]],
            vec![vec![f64::NAN; 2], vec![f64::NAN; 2], vec![9.0, 11.0]],
            vec![vec![f64::NAN; 2], vec![f64::NAN; 2], vec![10.0, 10.0]],
        ],
        memcpy: [(65536, vec![20000.0, 16000.0])].into_iter().collect(),
        refused: vec![(2, "lat cas allocate flush".into(), "MPI_ERR_WIN".into())],
        failures: Vec::new(),
        rounds: 2,
        cpus: (0, 1),
    }
}

#[test]
fn ratios_pair_the_rounds_and_judge_the_targets() {
    let o = outcome();
    assert_eq!(o.pairs(Transport::Node), [(0, 1), (0, 2), (1, 2)]);
    assert_eq!(o.pairs(Transport::Tcp), [(3, 4)]);
    let r = o.ratio(0, 1, 0).unwrap();
    assert_eq!((r.median, r.min, r.max), (1.5, 1.0, 2.0));
    assert_eq!(o.ratio(0, 2, 0).map(|s| s.median), Some(0.125));
    let f = o.of_memcpy(0, 1).unwrap();
    assert_eq!((f.min, f.max), (0.5, 0.5));
    assert_eq!(o.of_memcpy(0, 0), None);
    let (m, rows) = (&o.members, &o.rows);
    assert_eq!(target(&rows[0], &m[0], &m[1]).map(|t| t.bound), Some(1.0));
    assert_eq!(target(&rows[0], &m[0], &m[2]).map(|t| t.bound), Some(0.2));
    assert_eq!(target(&rows[0], &m[1], &m[2]), None);
    assert_eq!(target(&rows[2], &m[3], &m[4]).map(|t| t.bound), Some(0.9));
    let t = text(&o);
    assert!(t.contains("nemesis-c-abi/openmpi") && t.contains("openmpi/mpich"), "{t}");
    assert!(
        t.contains("node lat put allocate 8 B: nemesis-c-abi/openmpi 1.50 [1.00..2.00] (target <=1): MISSED"),
        "{t}"
    );
    assert!(
        t.contains("node lat put allocate 8 B: nemesis-c-abi/mpich 0.125 [0.125..0.125] (target <=0.2): met"),
        "{t}"
    );
    assert!(
        t.contains("tcp lat put allocate 8 B: nemesis-c-abi-tcp/openmpi-tcp 1.00 [0.900..1.10] (target <=0.9)"),
        "{t}"
    );
    assert!(t.contains("mpich-tcp") && t.contains("skipped: not compared"), "{t}");
    assert!(t.contains("mpich: MPI_ERR_WIN: lat cas allocate flush"), "{t}");
    let dir = std::env::temp_dir().join(format!("nemesis-bench-rma-{}", std::process::id()));
    let files = write_csv(&o, &dir).unwrap();
    assert_eq!(files.len(), 2);
    let csv = std::fs::read_to_string(dir.join("rma.csv")).unwrap();
    assert_eq!(csv.lines().next(), Some(COLUMNS));
    // Three node members with two node rows, two TCP members with one TCP row.
    assert_eq!(csv.lines().count(), 1 + 3 * 2 + 2);
    assert!(csv.contains("nemesis-c-abi,nemesis,node,bw,get,allocate,flush,65536,MB/s,2,9000,8000,10000,1.5,1,2,3,2,4,18000,0.5,0.5,0.5"), "{csv}");
    assert!(
        csv.contains("nemesis-c-abi-tcp,nemesis,tcp,lat,put,allocate,flush,8,us,2,10,9,11,1,0.9,1.1,,,,,,,"),
        "{csv}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
