# blockspeaker's HNS script worker (src/hns/worker.ts): reads one JSON request per line on stdin,
# {"id": N, "script": "..."}, runs the script in this one long-lived PowerShell (so HNS.V2.psm1 is imported and
# compiled once), and writes {"id": N, "code": C, "stdout": "...", "stderr": "..."} as one line of UTF-8 JSON.
$ErrorActionPreference = 'Continue'
[Console]::InputEncoding = [System.Text.UTF8Encoding]::new($false)
[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false)
$stdin = [Console]::In
while ($null -ne ($line = $stdin.ReadLine())) {
    if ($line.Trim() -eq '') { continue }
    $req = $line | ConvertFrom-Json
    $code = 0
    $errs = @()
    try {
        # An apply script stops with `exit 3` after reporting a failed op; `exit` would end this worker, so it
        # becomes `return` (the report line is already written) and the code is set from the report.
        $text = $req.script -replace '\bexit 3\b', 'return'
        $out = & ([scriptblock]::Create("& { $text } 2>&1")) | ForEach-Object {
            if ($_ -is [System.Management.Automation.ErrorRecord]) { $errs += ($_ | Out-String); $code = 1 } else { "$_" }
        }
        if (@($out) -match '^##blockspeaker fail ') { $code = 3 }
    } catch {
        $errs += ($_ | Out-String)
        $code = 1
    }
    $reply = @{ id = $req.id; code = $code; stdout = (@($out) -join "`r`n"); stderr = ($errs -join "`r`n") }
    [Console]::Out.WriteLine((ConvertTo-Json -InputObject $reply -Compress -Depth 3))
    [Console]::Out.Flush()
}
