#!/usr/bin/env bash
# Keeps the repository self-contained and about the product: no tracked
# file may cite a document that is not in the repository (a design note,
# a reference kept elsewhere, a link to a missing file or anchor), and none
# may narrate the periods of work that made it ("session 4", "this
# session"): measurements are dated and named by commit instead; and every
# test of the replication model is named in docs/replication.md. Prints
# each finding and fails if there is any. scripts/test.sh runs it first;
# it needs only git, grep and perl.
set -euo pipefail
cd "$(dirname "$0")/.."

git ls-files -z | perl -0 -e '
use strict;
use warnings;

my $self = "scripts/check-docs.sh";
my @files = grep { $_ ne $self && !m{(^|/)go\.sum$} && !m{(^|/)vendor/} } map { chomp; $_ } <STDIN>;
my %tracked = map { $_ => 1 } @files;
$tracked{$self} = 1;
my %basename;
for (keys %tracked) { my ($b) = m{([^/]+)$}; $basename{$b} = 1 }

# Documents that live outside the repository, by how they are cited.
my @outside = (
	[qr/\x{a7}/, "a section sign (\x{a7}) cites a document outside the repository"],
	[qr/\bthe seeds\x27/i, "cites the seed sources, which are not in the repository"],
	[qr/\bseeds\//, "cites the seed sources, which are not in the repository"],
	[qr/\bDESIGN\.md\b/, "cites DESIGN.md, which is not in the repository"],
	[qr/(?<![\w.\/-])shared\//, "cites a shared/ folder outside the repository"],
	[qr/replication-behaviour/, "cites the replication-behaviour reference; use docs/replication.md"],
	[qr/nsq-protocol\.md/, "cites the NSQ protocol reference, which is not in the repository"],
	[qr/performance-baseline/, "cites the performance-baseline note, which is not in the repository"],
	[qr/toolchain-notes/, "cites the toolchain notes, which are not in the repository"],
	[qr/\b[Ii]ssue #?[0-9]+\b/, "cites a tracker issue, which is not in the repository"],
);

# Narration of the periods of work, in any file.
my @narration = (
	[qr/\bsessions?[ \t]*\n?[ \t]*(?:\/\/|#|\*)?[ \t]*[0-9]+\b/i, "names a work session; date it and name its commit"],
	[qr/\b(?:previous|next|earlier|later) (?:work )?sessions?\b/i, "narrates work sessions; date it and name its commit"],
	[qr/\bsession\x27s final code\b|\b(?:start|end) of (?:the )?session\b/i, "narrates a work session; name the commit"],
	[qr/\bstop [0-9]+\b(?! ?(?:nodes?|replicas?|partitions?|of|times|s|ms|seconds?|minutes?)\b)/, "names a work stop; date it and name its commit"],
	[qr/\b(?:in )?this (?:work )?period\b|\bwork period/i, "narrates a period of work; date it and name its commit"],
	[qr/\bthis branch\b/i, "narrates a branch; name the commit"],
	[qr/\bwe then\b/i, "narrates the work; describe the product"],
);
# In prose only: in code, "this session" is a client or replication session.
my @prose_narration = (
	[qr/\b(?:this|last) (?:work )?session\b(?!\x27s)/i, "narrates a work session; date it and name its commit"],
);

binmode(STDOUT, ":encoding(UTF-8)");
binmode(STDERR, ":encoding(UTF-8)");
my (@found, %seen);
sub report { my ($f, $text, $pos, $what, $m) = @_;
	my $line = 1 + (substr($text, 0, $pos) =~ tr/\n//);
	$m =~ s/\s+/ /g;
	return if $seen{"$f:$line:$m"}++;
	push @found, [$f, $line, "$f:$line: $what: \"$m\""];
}

sub slug { my $h = lc shift; $h =~ s/<[^>]*>//g; $h =~ s/[^\w\- ]//g; $h =~ s/ /-/g; return $h }
my %anchors;
sub anchors_of { my $f = shift;
	return $anchors{$f} if $anchors{$f};
	my %a;
	if (open(my $fh, "<:encoding(UTF-8)", $f)) {
		local $/; my $t = <$fh>;
		$a{$1} = 1 while $t =~ /<a (?:id|name)="([^"]+)"/g;
		$a{slug($1)} = 1 while $t =~ /^#+\s+(.*?)\s*$/mg;
	}
	return $anchors{$f} = \%a;
}

sub norm { my $p = shift; my @out;
	for (split m{/}, $p) { next if $_ eq "." || $_ eq ""; if ($_ eq "..") { pop @out } else { push @out, $_ } }
	return join "/", @out;
}

# check_target reports a cited file or anchor that does not exist. A
# markdown link resolves from the citing file, as GitHub resolves it; a
# mention in text may also name a path from the repository root or just
# the file name of a tracked document.
sub check_target { my ($f, $text, $pos, $target, $link) = @_;
	my ($path, $anchor) = split /#/, $target, 2;
	my ($dir) = $f =~ m{^(.*)/} ? ($1) : ("");
	my $resolved;
	if ($path eq "") {
		$resolved = $f;
	} else {
		my @try = (norm($dir eq "" ? $path : "$dir/$path"));
		push @try, norm($path) unless $link;
		for (@try) { if ($tracked{$_} || -e $_) { $resolved = $_; last } }
		if (!defined $resolved && !$link && $path !~ m{/} && $basename{$path}) {
			return;
		}
	}
	if (!defined $resolved) {
		report($f, $text, $pos, "cites $path, which is not in the repository", $target);
		return;
	}
	if (defined $anchor && $anchor ne "" && $resolved =~ /\.md$/ && !anchors_of($resolved)->{$anchor}) {
		report($f, $text, $pos, "cites an anchor $resolved has not", $target);
	}
}

for my $f (@files) {
	next unless -f $f && !-l $f && -T $f;
	open(my $fh, "<:encoding(UTF-8)", $f) or next;
	local $/; my $text = <$fh>; close $fh;
	next unless defined $text;
	my $md = $f =~ /\.md$/;
	my $prose = $md || $f =~ /\.(txt|sh|ya?ml|toml)$/;
	for my $p (@outside, @narration, $prose ? @prose_narration : ()) {
		my ($re, $what) = @$p;
		while ($text =~ /$re/g) { report($f, $text, $-[0], $what, $&) }
	}
	if ($md) {
		while ($text =~ /\]\(\s*([^)\s]+)\s*\)/g) {
			my ($t, $pos) = ($1, $-[1]);
			next if $t =~ m{^[a-z][a-z0-9+.-]*:}i || $t =~ m{^/};
			check_target($f, $text, $pos, $t, 1);
		}
	}
	while ($text =~ m{(?<![\w/.-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)*\.md(?:#[\w-]+)?)(?![\w/])}g) {
		my ($t, $pos) = ($1, $-[1]);
		next if $md && substr($text, $pos - 2, 2) eq "](";
		check_target($f, $text, $pos, $t, 0);
	}
}

if (@found) {
	print STDERR "check-docs: cite only what the repository holds, and describe the product, not the work:\n";
	print STDERR "  $_->[2]\n" for sort { $a->[0] cmp $b->[0] || $a->[1] <=> $b->[1] } @found;
	exit 1;
}
print "check-docs: no outside citations, no work-period narration (", scalar(@files), " files)\n";
'

# Every test of the replication model is named in docs/replication.md,
# beside the rule it checks, so a rule's tests are found from the doc and a
# new test brings its rule's description with it.
missing=$(git ls-files -z -- 'actors/*_test.go' 'broker/*_test.go' 'cluster/*_test.go' 'replication/*_test.go' 'tests/cluster/*_test.go' |
	xargs -0 grep -ho '^func Test[A-Za-z0-9_]*' | sed 's/^func //' | grep -vx TestMain | sort -u |
	while read -r t; do grep -qw -- "$t" docs/replication.md || echo "$t"; done)
if [[ -n $missing ]]; then
	echo "check-docs: tests of the replication model that docs/replication.md does not name (add each to its rule's Tests: line):" >&2
	sed 's/^/  /' <<<"$missing" >&2
	exit 1
fi
