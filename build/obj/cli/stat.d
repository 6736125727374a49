build/obj/cli/stat.o: src/cli/stat.c src/cli/cli.h \
 include/sluice/config.h include/sluice/shm-t.h include/sluice/clock.h \
 include/sluice/ctl.h include/sluice/shm.h include/sluice/stats.h
src/cli/cli.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/clock.h:
include/sluice/ctl.h:
include/sluice/shm.h:
include/sluice/stats.h:
