build/obj/core/admit.o: src/core/admit.c include/sluice/admit.h \
 include/sluice/match.h include/sluice/shm-t.h include/sluice/common.h \
 include/sluice/limiter.h include/sluice/shm.h include/sluice/config.h \
 include/sluice/stats.h
include/sluice/admit.h:
include/sluice/match.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/limiter.h:
include/sluice/shm.h:
include/sluice/config.h:
include/sluice/stats.h:
