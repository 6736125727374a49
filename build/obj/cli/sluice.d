build/obj/cli/sluice.o: src/cli/sluice.c src/cli/cli.h \
 include/sluice/config.h include/sluice/shm-t.h include/sluice/ctl.h \
 include/sluice/log.h
src/cli/cli.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/ctl.h:
include/sluice/log.h:
