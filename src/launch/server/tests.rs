use super::*;

fn replies(s: &mut PmiServer, rank: u32, line: &str) -> Vec<Action> {
    let mut out = Vec::new();
    s.on_line(rank, line, &mut out);
    out
}

fn reply(rank: u32, line: &str) -> Action {
    Action::Reply { rank, line: format!("{line}\n") }
}

#[test]
fn start_up_exchanges_match_hydra() {
    let mut s = PmiServer::new(2, "kvs_1_0");
    assert_eq!(
        replies(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1"),
        [reply(0, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")]
    );
    assert_eq!(
        replies(&mut s, 1, "cmd=init pmi_version=3 pmi_subversion=0"),
        [reply(1, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=get_maxes"),
        [reply(0, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0")]
    );
    assert_eq!(replies(&mut s, 0, "cmd=get_appnum"), [reply(0, "cmd=appnum appnum=0 rc=0")]);
    assert_eq!(replies(&mut s, 1, "cmd=get_my_kvsname"), [reply(1, "cmd=my_kvsname kvsname=kvs_1_0 rc=0")]);
    assert_eq!(replies(&mut s, 1, "cmd=get_universe_size"), [reply(1, "cmd=universe_size size=2 rc=0")]);
}

#[test]
fn put_get_and_missing_keys() {
    let mut s = PmiServer::new(2, "kvs");
    s.preput("nemesis-seg-x", "fd:5");
    assert_eq!(replies(&mut s, 0, "cmd=put kvsname=kvs key=a value=1"), [reply(0, "cmd=put_result rc=0 msg=success")]);
    assert_eq!(replies(&mut s, 1, "cmd=get kvsname=kvs key=a"), [reply(1, "cmd=get_result rc=0 msg=success value=1")]);
    assert_eq!(
        replies(&mut s, 1, "cmd=get kvsname=kvs key=nemesis-seg-x"),
        [reply(1, "cmd=get_result rc=0 msg=success value=fd:5")]
    );
    assert_eq!(
        replies(&mut s, 1, "cmd=get kvsname=kvs key=missing"),
        [reply(1, "cmd=get_result rc=-1 msg=key_missing_not_found value=unknown")]
    );
    // Overwrite, as Hydra; escaped values round-trip unchanged.
    replies(&mut s, 0, "cmd=put kvsname=kvs key=a value=two\\ words");
    assert_eq!(
        replies(&mut s, 1, "cmd=get kvsname=kvs key=a"),
        [reply(1, "cmd=get_result rc=0 msg=success value=two\\ words")]
    );
    let long = "v".repeat(VALUE_MAX + 1);
    assert_eq!(
        replies(&mut s, 0, &format!("cmd=put kvsname=kvs key=b value={long}")),
        [reply(0, "cmd=put_result rc=-1 msg=value_too_long")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=put kvsname=kvs key=b"),
        [reply(0, "cmd=put_result rc=-1 msg=missing_key_or_value")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=put kvsname=other key=b value=1"),
        [reply(0, "cmd=put_result rc=-1 msg=unknown_kvsname_other")]
    );
    assert_eq!(s.value("b"), None);
}

#[test]
fn barrier_waits_for_every_active_rank() {
    let mut s = PmiServer::new(3, "kvs");
    assert!(replies(&mut s, 0, "cmd=barrier_in").is_empty());
    assert!(replies(&mut s, 2, "cmd=barrier_in").is_empty());
    assert_eq!(replies(&mut s, 0, "cmd=barrier_in"), [reply(0, "cmd=barrier_out rc=-1 msg=already_in_barrier")]);
    let out = replies(&mut s, 1, "cmd=barrier_in");
    assert_eq!(out, [reply(0, "cmd=barrier_out"), reply(1, "cmd=barrier_out"), reply(2, "cmd=barrier_out")]);
    // A second barrier starts empty.
    assert!(replies(&mut s, 1, "cmd=barrier_in").is_empty());
}

#[test]
fn departed_and_finalized_ranks_do_not_hold_a_barrier() {
    let mut s = PmiServer::new(3, "kvs");
    assert!(replies(&mut s, 0, "cmd=barrier_in").is_empty());
    let mut out = Vec::new();
    s.on_gone(2, &mut out);
    assert!(out.is_empty(), "rank 1 has not entered yet");
    assert_eq!(replies(&mut s, 1, "cmd=finalize"), [reply(1, "cmd=finalize_ack"), reply(0, "cmd=barrier_out")]);
    assert_eq!(replies(&mut s, 1, "cmd=barrier_in"), [reply(1, "cmd=error rc=-1 msg=barrier_in_after_finalize")]);
    // The last active rank alone passes barriers; once gone, nothing is released.
    assert_eq!(replies(&mut s, 0, "cmd=barrier_in"), [reply(0, "cmd=barrier_out")]);
    s.on_gone(0, &mut out);
    s.on_gone(0, &mut out);
    assert!(out.is_empty());
}

#[test]
fn gone_rank_releases_waiters() {
    let mut s = PmiServer::new(2, "kvs");
    assert!(replies(&mut s, 1, "cmd=barrier_in").is_empty());
    let mut out = Vec::new();
    s.on_gone(0, &mut out);
    assert_eq!(out, [reply(1, "cmd=barrier_out")]);
}

#[test]
fn abort_carries_code_and_message() {
    let mut s = PmiServer::new(2, "kvs");
    assert_eq!(
        replies(&mut s, 1, "cmd=abort exitcode=7 msg=it_broke"),
        [Action::Abort { rank: 1, code: 7, message: "it_broke".into() }]
    );
    // MPICH 4 sends `message=` with escaped spaces.
    assert_eq!(
        replies(&mut s, 0, "cmd=abort exitcode=3 message=it\\ broke"),
        [Action::Abort { rank: 0, code: 3, message: "it broke".into() }]
    );
    assert_eq!(replies(&mut s, 0, "cmd=abort"), [Action::Abort { rank: 0, code: 1, message: String::new() }]);
}

#[test]
fn junk_gets_error_replies_never_a_panic() {
    let mut s = PmiServer::new(1, "kvs");
    let err = |m: &str| [reply(0, &format!("cmd=error rc=-1 msg={m}"))];
    assert_eq!(replies(&mut s, 0, "cmd=bogus a=b"), err("unknown_command_bogus"));
    assert_eq!(replies(&mut s, 0, "hello"), err("expected_cmd"));
    assert_eq!(replies(&mut s, 0, "key=value cmd=get"), err("expected_cmd"));
    assert_eq!(replies(&mut s, 0, "cmd="), err("expected_cmd"));
    assert_eq!(replies(&mut s, 0, "cmd=get ==="), err("malformed_line"));
    assert_eq!(replies(&mut s, 0, "cmd=get k\u{e9}y=1"), err("malformed_line"));
    assert_eq!(replies(&mut s, 0, "cmd=get_result rc=0"), err("unknown_command_get_result"));
    assert!(replies(&mut s, 0, "").is_empty());
    assert!(replies(&mut s, 0, "   ").is_empty());
    assert!(replies(&mut s, 7, "cmd=init").is_empty(), "no such rank: ignored");
    assert_eq!(
        replies(&mut s, 0, "cmd=get key=x\\"),
        [reply(0, "cmd=get_result rc=-1 msg=key_x\\_not_found value=unknown")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=get key=\u{e9}\\\u{e9}"),
        [reply(0, "cmd=get_result rc=-1 msg=key__\\__not_found value=unknown")]
    );
    // A PMI-1 spawn block without a program is refused once, at its end.
    assert!(replies(&mut s, 0, "mcmd=spawn").is_empty());
    assert!(replies(&mut s, 0, "nprocs=2").is_empty());
    assert_eq!(replies(&mut s, 0, "endcmd"), [reply(0, "cmd=spawn_result rc=-1 msg=no_program_to_spawn")]);
    assert_eq!(replies(&mut s, 0, "cmd=get_appnum\r"), [reply(0, "cmd=appnum appnum=0 rc=0")]);
}

fn bytes(s: &mut PmiServer, rank: u32, input: &str) -> (Vec<Action>, bool, usize) {
    let mut buf = input.as_bytes().to_vec();
    let mut out = Vec::new();
    let ok = s.on_bytes(rank, &mut buf, &mut out);
    (out, ok, buf.len())
}

fn reply2(rank: u32, body: &str) -> Action {
    Action::Reply { rank, line: crate::pmi::v2::frame(body) }
}

#[test]
fn pmi2_conversation_as_hydra_serves_it() {
    let mut s = PmiServer::new(2, "kvs_9_0");
    s.preput("PMI_process_mapping", "(vector,(0,1,2))");
    // The PMI-1 style init switches the rank to PMI-2 framing; a message already behind it
    // in the same read is framed the new way.
    let f = crate::pmi::v2::frame;
    let (out, ok, left) =
        bytes(&mut s, 1, &format!("cmd=init pmi_version=2 pmi_subversion=0\n{}", f("cmd=fullinit;pmirank=1;")));
    assert!(ok && left == 0);
    assert_eq!(
        out,
        [
            reply(1, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"),
            reply2(
                1,
                "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=1;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;"
            )
        ]
    );
    assert_eq!(s.wire(1), Wire::V2);
    assert_eq!(s.wire(0), Wire::V1);
    let m = |s: &mut PmiServer, body: &str| {
        let mut out = Vec::new();
        s.on_message2(1, body, &mut out);
        out
    };
    assert_eq!(m(&mut s, "cmd=job-getid;"), [reply2(1, "cmd=job-getid-response;jobid=kvs_9_0;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=info-getjobattr;key=PMI_process_mapping;"),
        [reply2(1, "cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,1,2));rc=0;")]
    );
    assert_eq!(
        m(&mut s, "cmd=info-getjobattr;key=nothing;"),
        [reply2(1, "cmd=info-getjobattr-response;found=FALSE;rc=0;")]
    );
    assert_eq!(m(&mut s, "cmd=kvs-put;key=a;value=x y=z;"), [reply2(1, "cmd=kvs-put-response;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=kvs-get;jobid=kvs_9_0;key=a;"),
        [reply2(1, "cmd=kvs-get-response;found=TRUE;value=x y=z;rc=0;")]
    );
    assert_eq!(m(&mut s, "cmd=kvs-get;key=b;"), [reply2(1, "cmd=kvs-get-response;found=FALSE;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=kvs-get;jobid=other;key=a;"),
        [reply2(1, "cmd=kvs-get-response;rc=-1;errmsg=unknown jobid other;")]
    );
    assert_eq!(m(&mut s, "cmd=info-putnodeattr;key=n;value=1;"), [reply2(1, "cmd=info-putnodeattr-response;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=info-getnodeattr;key=n;"),
        [reply2(1, "cmd=info-getnodeattr-response;found=TRUE;value=1;rc=0;")]
    );
    // A PMI-1 rank and a PMI-2 rank share one barrier; each is answered in its own format.
    assert!(m(&mut s, "cmd=kvs-fence;").is_empty());
    assert_eq!(
        replies(&mut s, 0, "cmd=barrier_in"),
        [reply(0, "cmd=barrier_out"), reply2(1, "cmd=kvs-fence-response;rc=0;")]
    );
    // A PMI-1 rank sees what the PMI-2 rank put.
    assert_eq!(
        replies(&mut s, 0, "cmd=get kvsname=kvs_9_0 key=a"),
        [reply(0, "cmd=get_result rc=0 msg=success value=x y=z")]
    );
    assert_eq!(
        m(&mut s, "cmd=abort;isworld=TRUE;exitcode=4;message=bad thing;"),
        [Action::Abort { rank: 1, code: 4, message: "bad thing".into() }]
    );
    assert_eq!(m(&mut s, "cmd=finalize;"), [reply2(1, "cmd=finalize-response;rc=0;")]);
    assert_eq!(m(&mut s, "cmd=kvs-fence;"), [reply2(1, "cmd=kvs-fence-response;rc=-1;errmsg=after finalize;")]);
}

#[test]
fn pmi2_junk_gets_errors() {
    let mut s = PmiServer::new(2, "kvs");
    let f = crate::pmi::v2::frame;
    bytes(&mut s, 0, "cmd=init pmi_version=2 pmi_subversion=0\n");
    // Incomplete: kept for later.
    let (out, ok, left) = bytes(&mut s, 0, "    20cmd=kvs");
    assert!(out.is_empty() && ok && left == 13);
    let m = |s: &mut PmiServer, body: &str| {
        let mut out = Vec::new();
        s.on_message2(0, body, &mut out);
        out
    };
    assert_eq!(
        m(&mut s, "cmd=fullinit;pmirank=1;"),
        [reply2(0, "cmd=fullinit-response;rc=-1;errmsg=this connection is rank 0;")]
    );
    assert_eq!(m(&mut s, "key=x;"), [reply2(0, "cmd=error;rc=-1;errmsg=expected cmd=;")]);
    assert_eq!(m(&mut s, "cmd=spawn;ncmds=1;"), [reply2(0, "cmd=spawn-response;rc=-1;errmsg=no command to spawn;")]);
    assert_eq!(m(&mut s, "cmd=kvs-put;key=k;"), [reply2(0, "cmd=kvs-put-response;rc=-1;errmsg=missing key or value;")]);
    let long = "v".repeat(VALUE_MAX + 1);
    assert_eq!(
        m(&mut s, &format!("cmd=kvs-put;key=k;value={long};")),
        [reply2(0, "cmd=kvs-put-response;rc=-1;errmsg=value too long;")]
    );
    // A bad length field or an over-long message closes the connection.
    let (out, ok, _) = bytes(&mut s, 0, "abcdefcmd=x;");
    assert!(!ok);
    assert_eq!(out, [reply2(0, "cmd=error;rc=-1;errmsg=bad length field;")]);
    let (_, ok, _) = bytes(&mut s, 0, &format!("{:6}", MESSAGE2_MAX + 1));
    assert!(!ok);
    let (_, ok, left) = bytes(&mut s, 0, &f("cmd=kvs-fence;"));
    assert!(ok && left == 0);
    // PMI-1 lines too long still close.
    let (_, ok, _) = bytes(&mut s, 1, &"x".repeat(LINE_MAX + 1));
    assert!(!ok);
}

#[test]
fn a_rank_creates_a_bounded_number_of_keys() {
    let mut s = PmiServer::new(2, "kvs");
    let ok = [reply(0, "cmd=put_result rc=0 msg=success")];
    for k in 0..KEYS_PER_RANK {
        assert_eq!(replies(&mut s, 0, &format!("cmd=put kvsname=kvs key=k{k} value=v")), ok, "key {k}");
    }
    assert_eq!(
        replies(&mut s, 0, "cmd=put kvsname=kvs key=one-more value=v"),
        [reply(0, "cmd=put_result rc=-1 msg=too_many_keys")]
    );
    assert_eq!(s.value("one-more"), None);
    // Overwriting costs nothing; another rank has its own allowance.
    assert_eq!(replies(&mut s, 0, "cmd=put kvsname=kvs key=k0 value=w"), ok);
    assert_eq!(s.value("k0"), Some("w"));
    assert_eq!(replies(&mut s, 1, "cmd=put kvsname=kvs key=r1 value=v"), [reply(1, "cmd=put_result rc=0 msg=success")]);
    // A key removed (a dead rank's card) frees its place.
    s.remove("k1");
    assert_eq!(replies(&mut s, 0, "cmd=put kvsname=kvs key=one-more value=v"), ok);
    // PMI-2 puts and node attributes count alike.
    let mut out = Vec::new();
    s.on_bytes(0, &mut b"cmd=init pmi_version=2 pmi_subversion=0\n".to_vec(), &mut out);
    out.clear();
    s.on_message2(0, "cmd=kvs-put;key=two-more;value=v;", &mut out);
    s.on_message2(0, "cmd=info-putnodeattr;key=n;value=v;", &mut out);
    assert_eq!(
        out,
        [
            reply2(0, "cmd=kvs-put-response;rc=-1;errmsg=too many keys;"),
            reply2(0, "cmd=info-putnodeattr-response;rc=-1;errmsg=too many keys;")
        ]
    );
    // Keys too long are refused as before.
    let long = "k".repeat(KEY_MAX + 1);
    assert_eq!(
        replies(&mut s, 1, &format!("cmd=put kvsname=kvs key={long} value=v")),
        [reply(1, "cmd=put_result rc=-1 msg=key_too_long")]
    );
}

#[test]
fn over_long_input_closes_even_in_one_piece_and_aborts_are_cut() {
    let mut s = PmiServer::new(2, "kvs");
    // A whole line over the limit, newline included, in one read.
    let (out, ok, _) = bytes(&mut s, 0, &format!("cmd=get key={}\n", "x".repeat(LINE_MAX)));
    assert!(!ok, "{out:?}");
    assert_eq!(out, [reply(0, "cmd=error rc=-1 msg=line_too_long")]);
    assert_eq!(s.refusal(0), Some("a PMI line longer than 4096 bytes"));
    let (_, ok, left) = bytes(&mut s, 1, &format!("cmd=get key={}\n", "x".repeat(LINE_MAX - 12)));
    assert!(ok && left == 0, "a line of exactly the limit is fine");
    let msg = "\u{e9}".repeat(ABORT_TEXT_MAX);
    let out = replies(&mut s, 1, &format!("cmd=abort exitcode=2 message=x{msg}"));
    let [Action::Abort { message, .. }] = &out[..] else { panic!("{out:?}") };
    assert_eq!(message.len(), ABORT_TEXT_MAX - 1, "cut at a character boundary");
}

/// The spawn request `rank`'s lines made, if they made one.
fn spawn_of(out: &[Action]) -> Option<(u32, SpawnRequest)> {
    out.iter().find_map(|a| match a {
        Action::Spawn { rank, request } => Some((*rank, request.clone())),
        _ => None,
    })
}

#[test]
fn pmi1_spawn_blocks_make_one_request() {
    let mut s = PmiServer::with_universe(1, 6, "kvs");
    let mut out = Vec::new();
    let block = |cmd: &str, n: u32, so_far: u32, args: &[&str], info: &[(&str, &str)]| {
        let mut l = vec![
            "mcmd=spawn".to_owned(),
            format!("nprocs={n}"),
            format!("execname={cmd}"),
            "totspawns=2".into(),
            format!("spawnssofar={so_far}"),
            format!("argcnt={}", args.len()),
        ];
        l.extend(args.iter().enumerate().map(|(i, a)| format!("arg{}={a}", i + 1)));
        l.push("preput_num=1".into());
        l.push("preput_key_0=PARENT_ROOT_PORT_NAME".into());
        l.push("preput_val_0=nemesis-port:0:1".into());
        l.push(format!("info_num={}", info.len()));
        for (i, (k, v)) in info.iter().enumerate() {
            l.push(format!("info_key_{i}={k}"));
            l.push(format!("info_val_{i}={v}"));
        }
        l.push("endcmd".into());
        l
    };
    for line in block("prog", 1, 1, &["a\\ b", "c"], &[("wdir", "/tmp")]) {
        s.on_line(0, &line, &mut out);
    }
    assert!(out.is_empty(), "the first of two blocks is not answered: {out:?}");
    for line in block("other", 2, 2, &[], &[]) {
        s.on_line(0, &line, &mut out);
    }
    let (rank, req) = spawn_of(&out).expect("a spawn request");
    assert_eq!(rank, 0);
    assert_eq!(req.cmds.len(), 2);
    assert_eq!((req.cmds[0].program.as_str(), req.cmds[0].maxprocs), ("prog", 1));
    assert_eq!(req.cmds[0].args, ["a b", "c"]);
    assert_eq!(req.cmds[0].info, [("wdir".to_owned(), "/tmp".to_owned())]);
    assert_eq!((req.cmds[1].program.as_str(), req.cmds[1].maxprocs), ("other", 2));
    assert_eq!(req.preput, [("PARENT_ROOT_PORT_NAME".to_owned(), "nemesis-port:0:1".to_owned())]);
    assert_eq!(req.total(), 3);
    // The supervisor admits them: a group of its own, with its pre-put key and appnums.
    assert_eq!(s.free_slots(), (1, 5));
    s.admit(1, &[0, 1, 1], &req.preput);
    assert_eq!(s.free_slots(), (4, 2));
    out.clear();
    s.spawn_done(0, Ok(vec![0, 0, 0]), &mut out);
    assert_eq!(out, [reply(0, "cmd=spawn_result rc=0 errcodes=0,0,0")]);
    assert_eq!(replies(&mut s, 2, "cmd=get_appnum"), [reply(2, "cmd=appnum appnum=1 rc=0")]);
    assert_eq!(
        replies(&mut s, 1, "cmd=get key=PARENT_ROOT_PORT_NAME"),
        [reply(1, "cmd=get_result rc=0 msg=success value=nemesis-port:0:1")]
    );
    // The parent's group does not see the children's pre-put keys.
    assert_eq!(
        replies(&mut s, 0, "cmd=get key=PARENT_ROOT_PORT_NAME"),
        [reply(0, "cmd=get_result rc=-1 msg=key_PARENT_ROOT_PORT_NAME_not_found value=unknown")]
    );
    assert_eq!(replies(&mut s, 0, "cmd=get_universe_size"), [reply(0, "cmd=universe_size size=6 rc=0")]);
    // A refusal carries its reason.
    out.clear();
    s.spawn_done(0, Err("no room".into()), &mut out);
    assert_eq!(out, [reply(0, "cmd=spawn_result rc=-1 msg=no_room")]);
}

#[test]
fn barriers_are_per_group() {
    let mut s = PmiServer::with_universe(2, 4, "kvs");
    s.admit(2, &[0, 0], &[]);
    // The children's barrier completes without the parents, and the parents' without them.
    assert!(replies(&mut s, 2, "cmd=barrier_in").is_empty());
    let out = replies(&mut s, 3, "cmd=barrier_in");
    assert_eq!(out, [reply(2, "cmd=barrier_out"), reply(3, "cmd=barrier_out")]);
    assert!(replies(&mut s, 0, "cmd=barrier_in").is_empty());
    let out = replies(&mut s, 1, "cmd=barrier_in");
    assert_eq!(out, [reply(0, "cmd=barrier_out"), reply(1, "cmd=barrier_out")]);
    // Unborn slots take part in nothing: a server with room beyond its ranks is not held up.
    let mut s = PmiServer::with_universe(1, 3, "kvs");
    assert_eq!(replies(&mut s, 0, "cmd=barrier_in"), [reply(0, "cmd=barrier_out")]);
}

#[test]
fn pmi2_spawn_and_names() {
    let mut s = PmiServer::with_universe(1, 3, "kvs");
    let mut out = Vec::new();
    s.on_message2(
        0,
        "cmd=spawn;ncmds=2;preputcount=1;ppkey0=K;ppval0=V;subcmd=a;maxprocs=1;argc=2;argv0=x;argv1=y;\
         infokeycount=1;infokey0=host;infoval0=n1;subcmd=b;maxprocs=1;argc=0;infokeycount=0;",
        &mut out,
    );
    let (_, req) = spawn_of(&out).expect("a spawn request");
    assert_eq!(req.cmds.len(), 2);
    assert_eq!(req.cmds[0].args, ["x", "y"]);
    assert_eq!(req.cmds[0].info, [("host".to_owned(), "n1".to_owned())]);
    assert_eq!(req.cmds[1].program, "b");
    assert_eq!(req.preput, [("K".to_owned(), "V".to_owned())]);
    let m = |s: &mut PmiServer, body: &str| {
        let mut out = Vec::new();
        s.on_message2(0, body, &mut out);
        out
    };
    assert_eq!(m(&mut s, "cmd=name-publish;name=svc;port=p1;"), [reply2(0, "cmd=name-publish-response;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=name-publish;name=svc;port=p2;"),
        [reply2(0, "cmd=name-publish-response;rc=-1;found=FALSE;errmsg=name already published;")]
    );
    assert_eq!(
        m(&mut s, "cmd=name-lookup;name=svc;"),
        [reply2(0, "cmd=name-lookup-response;rc=0;found=TRUE;value=p1;")]
    );
    assert_eq!(m(&mut s, "cmd=name-unpublish;name=svc;"), [reply2(0, "cmd=name-unpublish-response;rc=0;")]);
    assert_eq!(
        m(&mut s, "cmd=name-lookup;name=svc;"),
        [reply2(0, "cmd=name-lookup-response;rc=-1;found=FALSE;errmsg=name not found;")]
    );
}

#[test]
fn pmi1_names() {
    let mut s = PmiServer::new(2, "kvs");
    assert_eq!(replies(&mut s, 0, "cmd=publish_name service=s port=p"), [reply(0, "cmd=publish_result rc=0 info=ok")]);
    assert_eq!(
        replies(&mut s, 1, "cmd=publish_name service=s port=q"),
        [reply(1, "cmd=publish_result rc=-1 msg=name_already_published")]
    );
    assert_eq!(replies(&mut s, 1, "cmd=lookup_name service=s"), [reply(1, "cmd=lookup_result rc=0 port=p")]);
    assert_eq!(replies(&mut s, 1, "cmd=unpublish_name service=s"), [reply(1, "cmd=unpublish_result rc=0 info=ok")]);
    assert_eq!(
        replies(&mut s, 1, "cmd=unpublish_name service=s"),
        [reply(1, "cmd=unpublish_result rc=-1 msg=name_not_published")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=lookup_name service=s"),
        [reply(0, "cmd=lookup_result rc=-1 msg=name_not_found")]
    );
    assert_eq!(
        replies(&mut s, 0, "cmd=lookup_name"),
        [reply(0, "cmd=lookup_result rc=-1 msg=missing_or_long_service")]
    );
}
