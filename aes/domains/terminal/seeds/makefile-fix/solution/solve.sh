#!/bin/bash
set -euo pipefail
cd /app/site
# 1. the HTML list used an undefined variable ($(PAGE) instead of $(PAGES))
sed -i 's/\$(PAGE))/$(PAGES))/' Makefile
# 2. recipe lines must start with a tab, not spaces; 3. create build/ before writing into it
sed -i 's|^    python3 tools/render.py \$< \$@$|\t@mkdir -p $(@D)\n\tpython3 tools/render.py $< $@|' Makefile
# 4. the manifest must be rebuilt whenever the set of pages changes
sed -i 's|^build/manifest.txt:$|build/manifest.txt: $(HTML)|' Makefile
# 5. clean must remove the whole build directory
sed -i 's|^\trm -f build/\*.html$|\trm -rf build|' Makefile
make
make -q
