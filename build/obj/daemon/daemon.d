build/obj/daemon/daemon.o: src/daemon/daemon.c include/sluice/daemon.h \
 include/sluice/config.h include/sluice/shm-t.h include/sluice/shm.h \
 src/daemon/control.h include/sluice/admit.h include/sluice/match.h \
 include/sluice/clock.h include/sluice/common.h include/sluice/log.h
include/sluice/daemon.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/shm.h:
src/daemon/control.h:
include/sluice/admit.h:
include/sluice/match.h:
include/sluice/clock.h:
include/sluice/common.h:
include/sluice/log.h:
