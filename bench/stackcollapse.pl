#!/usr/bin/perl
# A stackcollapse for `perf script` text, the yardstick of bench/lj_merge.py.
# FlameGraph's stackcollapse-perf.pl is not packaged by Debian; this is
# written here from its documented behaviour with its default options, and
# does the same work per line: every line is tried as a sample header
# (comm, then pid or pid/tid), else as a callchain line `ip func (dso)`
# (greedy match, +0x offset cut, `->`-joined inline names split, an
# unknown symbol named [dso basename], C++/Go argument lists cut unless it
# is a Go method, quotes dropped); a blank line ends the sample and adds 1
# to the key comm;root;...;leaf. Any other line (registers, -F uregs) is
# warned about on stderr, as stackcollapse-perf.pl does. Prints the keys
# sorted.
#
# usage: perl bench/stackcollapse.pl [FILE]   (default: stdin)
use strict;
use warnings;

my %count;
my @frames;
my $comm;

while (my $line = <>) {
    next if substr($line, 0, 1) eq "#";
    chomp $line;
    if ($line eq "") {                       # end of a sample
        if (@frames) {
            unshift @frames, defined $comm ? $comm : "";
            $count{join(";", @frames)}++;
        }
        @frames = ();
        undef $comm;
        next;
    }
    if ($line =~ /^(\S.+?)\s+(\d+)\/*(\d+)*\s+/) {          # header
        $comm = $1;
        $comm =~ tr/ /_/;
    } elsif ($line =~ /^\s*(\w+)\s*(.+) \((\S*)\)/) {        # callchain
        my ($name, $dso) = ($2, $3);
        $name =~ s/\+0x[\da-f]+$//;
        next if $name =~ /^\(/;
        my @here;
        foreach my $f (split /->/, $name) {
            if ($f eq "[unknown]" && $dso ne "[unknown]") {
                ($f = $dso) =~ s{.*/}{};
                $f = "[$f]";
            }
            $f =~ s/;/:/g;
            $f =~ s/\((?!anonymous namespace\)).*// unless $f =~ /\.\(.*\)\./;
            $f =~ tr/"'//d;
            $f .= "_[i]" if @here;
            push @here, $f;
        }
        unshift @frames, @here;
    } else {
        warn "not a header or callchain line: $line\n";
    }
}
if (@frames) {
    unshift @frames, defined $comm ? $comm : "";
    $count{join(";", @frames)}++;
}
print "$_ $count{$_}\n" for sort keys %count;
