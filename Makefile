# README's two commands: `make lab` (set up, serve JupyterLab on the tutorials)
# and `make test` (set up, run every test). The work is in kernel/scripts so
# that the Dockerfile runs exactly what CI tests.
.PHONY: lab test setup doctor report truth

lab:
	kernel/scripts/lab.sh

test:
	kernel/scripts/test.sh

setup:
	kernel/scripts/setup.sh

doctor:
	go run ./kernel doctor

# make report PLAN=examples/plans/llama3-8b-lora.json
# PLAN reaches the script through the environment, never through a shell
# command line, so any file name works.
export PLAN
report:
	kernel/scripts/report.sh

# Ground truth from PyTorch (torch, transformers, peft; not part of make test).
truth:
	kernel/scripts/truth.sh
