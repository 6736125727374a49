#!/usr/bin/awk -f
# inert-config.awk: a config with its limit sections commented out.  [sluice] and
# every comment stay as they are; each line of another section that is not
# already a comment gets a leading ";" - so the examples read as before, and the
# file shapes nothing until the operator uncomments or adds a section.
/^\[/ { global = ($0 ~ /^\[sluice\]/) }
{
	if (!global && $0 !~ /^[ \t]*[;#]/ && $0 !~ /^[ \t]*$/ && !started) {
		print "; ---- every section below is an example, commented out: nothing is shaped"
		print "; ---- until you uncomment one or add your own, then run: sluice reload"
		print ";"
		started = 1
	}
	if (!global && $0 !~ /^[ \t]*[;#]/ && $0 !~ /^[ \t]*$/)
		print ";" $0
	else
		print
}
