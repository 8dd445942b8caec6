//! `volley step`'s tests: levels, and levels derived by value.

use super::*;
use crate::cli::{Cli, Command, RunArgs};
use clap::Parser;

fn step_args(args: &[&str]) -> StepArgs {
    let mut all = vec!["volley", "step"];
    all.extend(args);
    match Cli::try_parse_from(all).unwrap().command {
        Command::Step(args) => *args,
        _ => unreachable!(),
    }
}

/// A level as flag text, the way levels were once made: the oracle the
/// by-value levels are checked against.
fn level_flags(args: &StepArgs, level: f64) -> RunArgs {
    let mut run = args.run.clone();
    let human = |d: Duration| humantime::format_duration(d).to_string();
    let duration = humantime::parse_duration(&args.step_duration).unwrap();
    match args
        .step_ramp
        .as_deref()
        .map(|r| humantime::parse_duration(r).unwrap())
    {
        Some(ramp) => {
            run.stages = Some(format!(
                "{}:{level},{}:{level}",
                human(ramp),
                human(duration - ramp)
            ));
            run.rate = args.rate_steps.then_some(None);
        }
        None => {
            run.duration = Some(human(duration));
            if args.rate_steps {
                run.rate = Some(Some(level));
            } else {
                run.connections = Some(level.round().max(1.0) as usize);
            }
        }
    }
    run.requests = args.step_requests;
    run
}

fn recorded(plan: &Plan) -> serde_json::Value {
    serde_json::to_value(plan).unwrap()
}

#[test]
fn levels_are_the_plans_their_flags_would_make() {
    let url = "http://127.0.0.1:1/";
    for flags in [
        vec![url, "--levels", "1,3,200", "-t", "4", "-w", "5"],
        vec![
            url,
            "--levels",
            "2,5",
            "--step-ramp",
            "300ms",
            "--step-duration",
            "1s",
        ],
        vec![
            url,
            "--levels",
            "50,100",
            "--rate-steps",
            "-c",
            "3",
            "--max-connections",
            "9",
        ],
        vec![
            url,
            "--levels",
            "50,100",
            "--rate-steps",
            "--step-ramp",
            "1s",
            "--step-requests",
            "70",
        ],
        vec![
            url,
            "--from",
            "1",
            "--to",
            "40",
            "--factor",
            "3",
            "--step-requests",
            "9",
            "-w",
            "1s",
        ],
    ] {
        let args = step_args(&flags);
        let step = StepPlan::from_args(&args).unwrap();
        assert_eq!(step.plans.len(), step.levels.len(), "{flags:?}");
        for (level, plan) in step.levels.iter().zip(&step.plans) {
            let by_flags = Plan::from_args(&level_flags(&args, *level)).unwrap();
            assert_eq!(recorded(plan), recorded(&by_flags), "{flags:?} at {level}");
            assert_eq!(plan.request.targets[0].addrs, by_flags.request.targets[0].addrs);
        }
    }
}

#[test]
fn a_level_that_breaks_a_rule_is_refused_as_its_flags_would_be() {
    let url = "http://127.0.0.1:1/";
    // 2 connections per level, but the pool may not grow past 1.
    let args = step_args(&[
        url,
        "--levels",
        "10,20",
        "--rate-steps",
        "-c",
        "2",
        "--max-connections",
        "1",
    ]);
    let err = StepPlan::from_args(&args).unwrap_err().to_string();
    assert_eq!(err, "--max-connections 1 is below --connections 2");
    let err = StepPlan::from_args(&step_args(&[url, "--levels", "1,2", "--step-ramp", "0s"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--step-ramp must be longer than 0s"), "{err}");
}

#[test]
fn a_stepped_plan_file_is_read_once_and_each_level_derived_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plan.yml");
    std::fs::write(
        &file,
        "base: http://127.0.0.1:1\nconcurrency: 3\nrampup: 2\niterations: 50\nsuccess_codes: [200]\nplan:\n  - name: a\n    request: {url: /}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    for flags in [
        vec!["--plan", file, "--levels", "1,4"],
        vec!["--plan", file, "--levels", "20,40", "--rate-steps"],
        vec![
            "--plan",
            file,
            "--levels",
            "2,3",
            "--step-ramp",
            "100ms",
            "--step-duration",
            "1s",
        ],
    ] {
        let args = step_args(&flags);
        let step = StepPlan::from_args(&args).unwrap();
        let first = step.plans[0].request.scenario.as_ref().unwrap();
        for (level, plan) in step.levels.iter().zip(&step.plans) {
            // The same loaded file, not a second reading of it.
            assert!(
                Arc::ptr_eq(first, plan.request.scenario.as_ref().unwrap()),
                "{flags:?}"
            );
            let by_flags = Plan::from_plan_args(&crate::cli::PlanArgs {
                file: file.into(),
                tags: Vec::new(),
                skip_tags: Vec::new(),
                base: None,
                list_tags: false,
                list_tasks: false,
                run: level_flags(&args, *level),
            })
            .unwrap();
            assert_eq!(recorded(plan), recorded(&by_flags), "{flags:?} at {level}");
        }
    }
}

#[test]
fn geometric_levels_round_and_end_at_to() {
    assert_eq!(
        geometric_levels(10.0, 100.0, 2.0).unwrap(),
        vec![10.0, 20.0, 40.0, 80.0, 100.0]
    );
    assert_eq!(geometric_levels(1.0, 3.0, 1.2).unwrap(), vec![1.0, 2.0, 3.0]);
    assert!(geometric_levels(0.0, 3.0, 2.0).is_err());
    assert!(geometric_levels(5.0, 3.0, 2.0).is_err());
    assert!(geometric_levels(1.0, 3.0, 1.0).is_err());
}

#[test]
fn geometric_levels_refuse_a_factor_a_hair_above_one_or_an_endless_range() {
    // Many steps that round to few levels are fine...
    assert_eq!(geometric_levels(1.0, 3.0, 1.001).unwrap(), vec![1.0, 2.0, 3.0]);
    // ...but not billions of them, nor a range without end.
    let err = geometric_levels(1.0, 1.5, 1.000_000_000_1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("over a million steps"), "{err}");
    assert!(geometric_levels(1.0, f64::INFINITY, 2.0).is_err());
}

#[test]
fn a_step_run_takes_at_most_a_thousand_levels() {
    let url = "http://127.0.0.1:1/";
    let many = [
        "--rate-steps",
        "--from",
        "1",
        "--to",
        "100000000000000",
        "--factor",
        "1.0001",
    ];
    let err = match StepPlan::from_args(&step_args(&[&[url][..], &many[..]].concat())) {
        Err(err) => err.to_string(),
        Ok(step) => panic!("{} levels taken", step.levels.len()),
    };
    assert!(err.contains("at most 1000"), "{err}");
    let thousand: Vec<String> = (1..=MOST_LEVELS).map(|l| l.to_string()).collect();
    let list = thousand.join(",");
    let step = StepPlan::from_args(&step_args(&[url, "--rate-steps", "--levels", &list])).unwrap();
    assert_eq!(step.levels.len(), MOST_LEVELS);
}
