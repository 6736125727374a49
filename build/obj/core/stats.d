build/obj/core/stats.o: src/core/stats.c include/sluice/stats.h \
 include/sluice/shm-t.h include/sluice/common.h include/sluice/config.h \
 include/sluice/limiter.h include/sluice/match.h include/sluice/shm.h \
 include/sluice/units.h
include/sluice/stats.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/config.h:
include/sluice/limiter.h:
include/sluice/match.h:
include/sluice/shm.h:
include/sluice/units.h:
