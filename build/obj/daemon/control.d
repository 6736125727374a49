build/obj/daemon/control.o: src/daemon/control.c src/daemon/control.h \
 include/sluice/daemon.h include/sluice/config.h include/sluice/shm-t.h \
 include/sluice/shm.h include/sluice/clock.h include/sluice/common.h \
 include/sluice/ctl.h include/sluice/log.h include/sluice/stats.h
src/daemon/control.h:
include/sluice/daemon.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/shm.h:
include/sluice/clock.h:
include/sluice/common.h:
include/sluice/ctl.h:
include/sluice/log.h:
include/sluice/stats.h:
