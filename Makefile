# README's two commands: `make lab` (set up, serve JupyterLab on the tutorials)
# and `make test` (set up, run every test). The work is in kernel/scripts so
# that the Dockerfile runs exactly what CI tests.
.PHONY: lab test setup doctor report reports truth refresh docs releases

lab:
	kernel/scripts/lab.sh

test:
	kernel/scripts/test.sh

setup:
	kernel/scripts/setup.sh

# A fresh copy of the tutorials for make lab; the old copy is kept aside.
refresh:
	kernel/scripts/refresh.sh

doctor:
	go run ./kernel doctor

# make report PLAN=examples/plans/llama3-8b-lora.json        one plan's report
# make report PLANS="a.json b.json c.json"                     one report comparing them
# make reports PLANS="a.json b.json c.json"                    a report for each, in parallel
# PLAN and PLANS reach the scripts through the environment, never through a
# shell command line, so any file name works (PLANS splits at spaces, or
# at newlines when it holds one: then names may hold spaces).
# make report PLAN=axolotl.yml GPU=RTX-4090 [GPUS=8] [MODEL=…]  a config, as plan reads it
export PLAN PLANS GPU GPUS MODEL
report:
	kernel/scripts/report.sh

reports:
	kernel/scripts/reports.sh

# Ground truth from PyTorch (torch, transformers, peft; not part of make test).
truth:
	kernel/scripts/truth.sh

# The docs' tables of measured numbers, rewritten by what measures them.
docs:
	kernel/scripts/docs.sh

# The newest release of each modelled engine and library on the package
# index beside the newest the engine models (a maintainer's command).
releases:
	kernel/scripts/releases.sh
