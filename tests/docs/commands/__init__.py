"""Every command README.md and docs/*.md name is run by a test, or listed as not runnable here with
the reason (issue 25, item 1).

`python train.py -m experiment=ablate_init_quick` was documented and crashed at once, because the
tests composed the preset but never ran it. So each command runs as the docs write it: the
documented text itself is split as a shell would split it (`shlex`), `python` becomes this
interpreter, and only size-shrinking overrides are appended (fewer steps, a smaller grid, a smaller
corpus) where the documented run takes minutes. Placeholders (`outputs/<date>/<time>/...`, `corpus/*.txt`,
TinyStories) are filled with a run of these modules or a small file made here, in a scratch working
directory, so relative paths mean what they mean to a user.

The package: `table.py` maps each documented command to the test that runs it (`COMMANDS`),
`parse.py` finds the commands in the pages, `run.py` runs them, `inputs.py` makes the files a user
would bring; `test_table.py` checks the table against the docs. The commands that run here are split
over several test files, each a module-scoped pool of one group (train runs, data formats, sweeps,
tools, the Makefile's targets), so that `make test`'s two workers (`--dist loadfile`, a file each)
share them instead of one worker running all of them in a row.
"""
