build/obj/core/config.o: src/core/config.c include/sluice/config.h \
 include/sluice/shm-t.h include/sluice/common.h include/sluice/match.h \
 include/sluice/units.h include/sluice/config_keys.def
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/match.h:
include/sluice/units.h:
include/sluice/config_keys.def:
