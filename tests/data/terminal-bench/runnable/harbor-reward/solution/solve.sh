#!/bin/bash
printf '#!/bin/bash\necho $(( $1 + $2 ))\n' > /app/add.sh
chmod +x /app/add.sh
