"""``python -m scripts.bench run|merge|rebuild|agreement|replay|tunes|quick|floor|verdicts|whatif|whatif-replay|predictions|calibration|node ...``: the bench's one entry.

    run        measure workloads: the tuner against a grid and an interleaved final (run.py)
    merge      one summary of runs made in parts, from their results.json (parts.py)
    rebuild    the summary of a killed run, from its records.jsonl alone (parts.py)
    agreement  how a run's phases agree on the same configs (agreement.py)
    replay     how the model, corrected by a run's own tuner bursts, predicts what the bench
               measured, with the code checked out now (replay.py)
    tunes      each workload's tune as a user runs it, and the report's verdict (tunes.py)
    quick      the tune's wall time at its default budget and its pick against the rule in paired
               rounds, in one short device call (quick.py; scripts/bench/quick_gpu.sh runs it)
    floor      the least a judged tune can take on a run's own figures, and each tune's wall time
               past it (floor.py)
    verdicts   the report's verdict and top what-if of every recorded tune (whatif.py)
    whatif     what-ifs the report predicts, made and measured against the tuner's pick (whatif.py)
    whatif-replay the measured what-ifs predicted again from their recorded tuner results with
               the code checked out now, each side's batch split into next() and the step
               (whatif_replay.py)
    predictions the same default tune again and again, each pick re-measured (predictions.py)
    calibration every recorded pick and what-if, predicted against measured, with its interval
               and how often the interval held (calibration.py)
    node       a node of N ranks: the node tune's pick against the single-rank pick and the
               cpus-1 rule on every rank, interleaved (autoloader/node/__init__.py)

Run it from the repository's root (or with the root on PYTHONPATH): the package is ``scripts``.
"""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    from scripts.bench import node, run

    parser = argparse.ArgumentParser(prog="python -m scripts.bench", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    subs = {}
    subs["run"] = sub.add_parser("run", help="measure workloads", description=run.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_arguments(subs["run"])
    subs["merge"] = sub.add_parser("merge", help="one summary of runs made in parts",
                                   description="Write one summary into --out from the results.json of earlier runs' "
                                               "output folders (their records stay there), measuring nothing.")
    subs["merge"].add_argument("parts", nargs="+", metavar="DIR")
    subs["merge"].add_argument("--out", default="results/benchmarks", help="folder for the merged summary")
    subs["rebuild"] = sub.add_parser("rebuild", help="the summary of a killed run from its records",
                                     description="Write summary.md and results.json into --out from DIR/records.jsonl "
                                                 "alone, for a run killed before it could write them (a workload cut "
                                                 "short is marked partial).")
    subs["rebuild"].add_argument("source", metavar="DIR")
    subs["rebuild"].add_argument("--out", default="results/benchmarks", help="folder for the rebuilt summary")
    from scripts.bench import predictions, quick, tunes, whatif

    subs["tunes"] = sub.add_parser("tunes", help="each workload's tune as a user runs it, and the report's verdict",
                                   description=tunes.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tunes.add_arguments(subs["tunes"])
    subs["quick"] = sub.add_parser("quick", help="the tune's wall time and its pick against the rule, paired",
                                   description=quick.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    quick.add_arguments(subs["quick"])
    subs["whatif"] = sub.add_parser("whatif", help="what-ifs the report predicts, made and measured",
                                    description=whatif.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    whatif.add_arguments(subs["whatif"])
    subs["predictions"] = sub.add_parser("predictions", help="the same tune again and again, each pick re-measured",
                                         description=predictions.__doc__,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
    predictions.add_arguments(subs["predictions"])
    subs["node"] = sub.add_parser("node", help="a node of N ranks: node pick vs single-rank pick vs the rule",
                                  description=node.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    node.add_arguments(subs["node"])
    for name, text in (("agreement", "how a run's phases agree on the same configs"),
                       ("verdicts", "the report's verdict and top what-if of every recorded tune"),
                       ("calibration", "every recorded pick and what-if, predicted against measured, with its "
                                       "interval and how often the interval held"),
                       ("floor", "the least a judged tune can take on a run's own figures, and each tune's "
                                 "wall time past it"),
                       ("replay", "how the model, corrected by a run's own tuner bursts, predicts what the bench "
                                  "measured"),
                       ("whatif-replay", "the measured what-ifs predicted again from their recorded tuner results "
                                         "(a replay: a prediction, not a measurement)")):
        subs[name] = sub.add_parser(name, help=text, description=text + "; prints Markdown.")
        subs[name].add_argument("records", nargs="+", metavar="RECORDS.jsonl")
    return parser, subs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, subs = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        from scripts.bench import run

        return run.main(args, subs["run"], argv)
    if args.command == "node":
        from scripts.bench import node

        return node.main(args, subs["node"], argv)
    if args.command in ("merge", "rebuild"):
        from scripts.bench import parts

        if args.command == "merge":
            print(parts.merge([os.path.abspath(p) for p in args.parts], os.path.abspath(args.out)))
        else:
            print(parts.rebuild(os.path.abspath(args.source), os.path.abspath(args.out)))
        return 0
    if args.command == "tunes":
        from scripts.bench import tunes

        return tunes.main(args)
    if args.command == "whatif":
        from scripts.bench import whatif

        return whatif.main(args)
    if args.command == "quick":
        from scripts.bench import quick

        return quick.main(args)
    if args.command == "verdicts":
        from scripts.bench import whatif

        return whatif.verdicts_main(args.records)
    if args.command == "predictions":
        from scripts.bench import predictions

        return predictions.main(args)
    if args.command == "calibration":
        from scripts.bench import calibration

        return calibration.main(args.records)
    if args.command == "floor":
        from scripts.bench import floor

        return floor.main(args.records)
    if args.command == "replay":
        from scripts.bench import replay

        return replay.main(args.records)
    if args.command == "whatif-replay":
        from scripts.bench import whatif_replay

        return whatif_replay.main(args.records)
    from scripts.bench import agreement

    return agreement.main(args.records)


if __name__ == "__main__":
    sys.exit(main())
