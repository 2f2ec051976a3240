#!/bin/sh
# Usage: scripts/result_reads.sh REV (a git revision); the lines it prints are the reads.
# String-key reads of a stored result outside the record's own modules (store/result.py, parts.py,
# records.py, comparison.py, checks.py, validate.py, door.py, claims.py): every literal-key read in autoloader/,
# less the lines that read something else (progress events d[...], the report's own rows and paths,
# registry/TOML tables, the dashboard's WSGI status, a tune's build arguments, a study's fleet marks (push.py), DataLoader kwargs, Optuna params, a mark's owner envelope, the retune report's
# machine, a Ceiling's dict).
G='\[["'"'"'][a-z_]+["'"'"']\]|\.get\(["'"'"'][a-z_]+["'"'"']'
git grep -nE "$G" $1 -- autoloader \
 ':!autoloader/store/result.py' ':!autoloader/store/parts.py' ':!autoloader/store/records.py' \
 ':!autoloader/store/comparison.py' ':!autoloader/store/checks.py' ':!autoloader/store/validate.py' ':!autoloader/store/door.py' ':!autoloader/store/claims.py' \
 ':!autoloader/search' ':!autoloader/probe' ':!autoloader/node' ':!autoloader/inputs' ':!autoloader/integrations/accelerate.py' \
 ':!autoloader/integrations/huggingface.py' ':!autoloader/integrations/lightning.py' ':!autoloader/fleet/registry.py' \
 ':!autoloader/store/study.py' ':!autoloader/store/durable.py' ':!autoloader/store/push.py' \
 | grep -vE "autoloader/tuning/progress.py:[0-9]+: .*\bd\[|\bd\.get\(|q\['|paths\[|\br\[['\"]|row\[|\"_class\"|ceiling.to_dict|trial\.params|fixed\.get|kwargs\[\"sampler\"\]|registry\.fleet|settings\.get|written\.paths|data\[\"owner\"\]|data\[\"state\"\]|hw\.get|report\.to_dict|fields\[|table\.get|entry\.get|caps\[|\{r\[|\)\[\"html\"\]|said\.get|loggerDict|build\.get|problem\.fixed_kwargs\.get|how_sure\(" 
