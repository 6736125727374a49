build/obj/cli/run.o: src/cli/run.c src/cli/cli.h include/sluice/config.h \
 include/sluice/shm-t.h include/sluice/common.h include/sluice/ctl.h \
 include/sluice/daemon.h include/sluice/shm.h include/sluice/log.h
src/cli/cli.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/ctl.h:
include/sluice/daemon.h:
include/sluice/shm.h:
include/sluice/log.h:
