use crate::sim::*;

#[test]
fn smoke_failure_free_and_one_failure() {
    let program = program_from_messages(4, &[(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (2, 1)], &[]);
    let cfg = Config::new(vec![0, 0, 1, 1]);
    let report = Sim::new(program.clone(), cfg.clone())
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(report.stats.rounds, 0);
    for seed in 0..50 {
        let mut cfg = cfg.clone();
        cfg.seed = seed;
        cfg.schedule = vec![
            (When::Step(seed % 12), Event::Checkpoint(1)),
            (When::Step(5 + seed % 9), Event::Fail(vec![0])),
        ];
        Sim::new(program.clone(), cfg)
            .unwrap()
            .run()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
